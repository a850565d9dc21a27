import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, inject } from 'vitest';
import { type Cluster, postgresBin, startCluster } from './pg-cluster.ts';

const admin = inject('postgresAdminUrl');

/** Whether the tests have a PostgreSQL (see test/postgres/pg-setup.ts). */
export const postgresAvailable = (): boolean => admin !== null;

/** A `describe` skipped when there is no PostgreSQL (the setup said so once, on a line of its own). */
export const describePostgres = describe.skipIf(!postgresAvailable());

/** A `describe` skipped when private clusters cannot be started (no PostgreSQL binaries; the setup said so once). */
export const describePrivateCluster = describe.skipIf(postgresBin() === undefined);

/** Runs one statement (or a few, without parameters) at `url`; returns the rows of the last. */
export async function sql(url: string, text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** A database of a test's own, so that test files run in parallel; `drop` removes it (closing what is still connected). */
export async function testDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  if (admin === null) throw new Error('no PostgreSQL for the tests (see test/postgres/pg-setup.ts)');
  const name = `t_${randomBytes(6).toString('hex')}`;
  await sql(admin, `CREATE DATABASE ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  // Connections still closing are let go first: one that FORCE ends while it says goodbye emits an error nobody hears
  // (its pool let it go), which fails the whole test file. Bounded: what is left then is ended by FORCE.
  const drop = async () => {
    for (let tries = 0; tries < 100; tries++) {
      const [open] = await sql(admin, `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1`, [name]);
      if (open?.n === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await sql(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  };
  return { url: url.toString(), name, drop };
}

/**
 * A cluster of a test's own, to stop and start mid-run without disturbing other tests (stopping the shared one would
 * fail every file running beside it). Needs the machine's PostgreSQL binaries, even when WEBDATA_TEST_DATABASE_URL
 * names a server: undefined without them. Wrap such tests in `describePrivateCluster`. The test must `destroy()` it;
 * if its process dies first, a watchdog does (test/postgres/pg-cluster.ts).
 */
export async function privateCluster(): Promise<Cluster | undefined> {
  const bin = postgresBin();
  return bin === undefined ? undefined : startCluster(bin);
}

/** The text of every statement the pool's connections send (each connection's `query` wrapped as it connects). */
export function spiedStatements(pool: pg.Pool): string[] {
  const sent: string[] = [];
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const first = args[0];
      sent.push(typeof first === 'string' ? first : String((first as { text?: unknown }).text));
      return query(...args);
    };
  });
  return sent;
}
