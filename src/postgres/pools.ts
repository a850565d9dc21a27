import { createRequire } from 'node:module';
import type pg from 'pg';
import { checkConnection } from './before-connect.ts';
import { driverConfig } from './driver-parse.ts';
import { isTransient } from './failure.ts';
import { watchContact } from './reached.ts';
import { endSession, knownSession, learnSession, type ServerSession } from './sessions.ts';
import type { PostgresTarget } from './target.ts';
import { postgresTimeouts } from './timeouts.ts';
import { transactionStatements } from './statements.ts';

/** Connections per database within a run: pages commit one at a time, so a few cover commits, reads and the lease. */
const POOL_SIZE = 4;

/**
 * The pg driver, loaded on first use: a run with no PostgreSQL in it does not carry it, nor pg-boss, which only a
 * distributed run loads (what each weighs: docs/benchmarks.md#figures-the-code-cites).
 */
export function pgDriver(): typeof pg {
  driver ??= createRequire(import.meta.url)('pg') as typeof pg;
  return driver;
}
let driver: typeof pg | undefined;

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

/**
 * A pool of at most `max` connections to `target`, every wait bounded (see `postgresTimeouts`) — but a transaction
 * left idle when `cursors` says a reader holds one open while its consumer (a slow pipe) takes its time. An idle
 * connection cut by the server (a restart) is reported on the pool; without a listener it would crash the process:
 * the pool drops it, and the next query gets a new connection. Refused first, exit 2, if `target` is one a connection
 * must not be opened to (`checkConnection`).
 */
export function openPool(target: PostgresTarget, max: number, options: { cursors?: boolean } = {}): pg.Pool {
  checkConnection(target);
  const pool = new (pgDriver().Pool)({ ...connectionConfig(target, options), max, onConnect: learnSession });
  pool.on('error', () => undefined);
  watchContact(pool, target);
  return pool;
}

/**
 * One connection to `target` in node-postgres' pipeline mode (its statements sent without waiting for the answers of
 * those before, run by the server in the order sent, each its own transaction: docs/design.md#the-run-host), with the
 * pool's bounds. Not connected yet; a cut connection is reported on it, which the caller must hear.
 */
export function openPipelinedClient(target: PostgresTarget): pg.Client {
  checkConnection(target);
  return new (pgDriver().Client)({ ...connectionConfig(target, {}), pipeline: true });
}

/** A connection's configuration, every wait bounded (`postgresTimeouts`). */
function connectionConfig(target: PostgresTarget, options: { cursors?: boolean }): pg.ClientConfig {
  const timeouts = postgresTimeouts();
  // The URL's parameters as node-postgres reads them, under our bounds rather than over them: given a connection
  // string, node-postgres lets its parameters override the options beside it, so a file's
  // `?statement_timeout=0&query_timeout=0&idle_in_transaction_session_timeout=0` unbounded every wait.
  return {
    application_name: 'webdata-etl',
    ...(target.connectionString === undefined ? {} : driverConfig(target.connectionString)),
    connectionTimeoutMillis: timeouts.connect,
    statement_timeout: timeouts.statement,
    ...(options.cursors ? {} : { idle_in_transaction_session_timeout: timeouts.idleInTransaction }),
    query_timeout: timeouts.query,
    keepAlive: true,
  };
}

/**
 * One pool per database within a run, so that the state store and the PostgreSQL sinks on the same database share
 * it. Keyed by the database's identity (server and name), not the URL's spelling.
 */
export function postgresPools() {
  const pools = new Map<string, pg.Pool>();
  return {
    get(target: PostgresTarget): pg.Pool {
      // Each target is checked, not only the one that opened the pool: a file's url is held to the same rule wherever it points.
      checkConnection(target);
      let pool = pools.get(target.database);
      if (!pool) {
        pool = openPool(target, POOL_SIZE);
        pools.set(target.database, pool);
      }
      return pool;
    },
    async closeAll(): Promise<void> {
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((pool) => pool.end().catch(() => undefined)));
    },
  };
}

export type PostgresPools = ReturnType<typeof postgresPools>;

/**
 * Runs `work` on one connection of the pool, its own until it settles. A connection whose work failed is destroyed, not
 * returned to the pool, so that the next work does not inherit a broken socket or a session in a state nobody knows.
 */
export async function onConnection<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A connection cut while checked out (a server restart) emits 'error' on it, which pg-pool listens for only while
  // the connection is idle: unheard, it would crash the process. The statement waiting on it fails, and is retried.
  const heard = (error: Error) => {
    broken = error;
  };
  client.on('error', heard);
  let broken: Error | undefined;
  try {
    return await work(client);
  } catch (error) {
    broken ??= error instanceof Error ? error : new Error(String(error));
    throw error;
  } finally {
    client.off('error', heard);
    client.release(broken);
  }
}

/** Runs `work` in a transaction on `client`: committed if it resolves, rolled back if it rejects. */
export async function inTransaction<T>(client: pg.PoolClient, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  await client.query(transactionStatements.begin);
  try {
    const result = await work(client);
    await client.query(transactionStatements.commit);
    return result;
  } catch (error) {
    // A rollback that fails leaves the connection to be destroyed (`onConnection`), which ends the transaction too.
    await client.query(transactionStatements.rollback).catch(() => undefined);
    throw error;
  }
}

/** Runs `work` in a transaction on one connection of the pool (`onConnection`, `inTransaction`). */
export function transaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return onConnection(pool, (client) => inTransaction(client, work));
}

/**
 * Runs a write on one connection of the pool whose server session is known (`sessions.ts`); if the connection is cut
 * (the answer lost), that session is ended before the failure is passed on, so that whoever asks whether the write
 * landed, or sends it again, does so once nothing of it can still land (docs/design.md#the-run-host). The connection is
 * given back (destroyed) first: the session is ended on another, and a full pool must not wait on itself.
 */
export async function onKnownSession<T>(db: { readonly pool: pg.Pool; readonly where: string }, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let session: ServerSession | undefined;
  try {
    return await onConnection(db.pool, async (client) => {
      session = await knownSession(client);
      return work(client);
    });
  } catch (error) {
    if (session && isTransient(error)) await endSession(db, session);
    throw error;
  }
}
