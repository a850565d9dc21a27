import { createHash } from 'node:crypto';
import type { Db, PgBoss } from 'pg-boss';
import { type Pool, type PoolClient, transaction } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import { serverStatements } from './statements.ts';

/**
 * pg-boss in the state store's database (its own schema beside ours), over the run's pool: the work of a
 * distributed run is a queue of series jobs, and a job completes in the same transaction as the page that ends its
 * series (`db` of that transaction's connection). pg-boss's own timers stay off but its supervisor, which hands the
 * jobs of a worker that stopped beating back to the queue.
 */
export async function openBoss(pool: Pool, stateSchema: string): Promise<PgBoss> {
  const schema = bossSchema(stateSchema);
  // Looked up first, as for the state schema: PostgreSQL checks the database's CREATE privilege before IF NOT EXISTS,
  // and a role given a schema an administrator made needs no more.
  const exists = (await pool.query(serverStatements.schemaExists, [schema])).rowCount === 1;
  const { PgBoss: Boss } = await loadBoss();
  const boss = new Boss({
    db: adapter(pool),
    schema,
    createSchema: !exists,
    schedule: false,
    supervise: true,
    superviseIntervalSeconds: SUPERVISE_SECONDS,
    // A queue's jobs are looked at (expiry by lost heartbeat) at most this often, whoever supervises.
    monitorIntervalSeconds: SUPERVISE_SECONDS,
    // Maintenance (deleting old jobs) runs where the queue's policy says, not on every worker's timer.
    maintenanceIntervalSeconds: 3600,
  });
  // pg-boss reports a failed timer (a restarting server) as an event: unheard, an 'error' event would end the process.
  boss.on('error', () => undefined);
  const installed = (await pool.query<{ found: boolean }>(serverStatements.tableExists, [`${quoteIdentifier(schema)}.version`])).rows[0]?.found;
  if (installed) {
    await boss.start();
    return boss;
  }
  // A new database: workers install pg-boss one at a time, each in a transaction begun after the one before committed.
  // pg-boss's own lock is taken inside its install's transaction, and a process that waited there can miss the
  // schema the other made (a duplicate key in pg_namespace, seen with three workers starting together, as they wait
  // for the planning lock: docs/benchmarks.md#joining-a-run). After this lock, it finds pg-boss installed.
  await transaction(pool, async (client) => {
    await client.query(serverStatements.advisoryXactLock, [`webdata-etl:boss-install:${schema}`]);
    await boss.start();
  });
  return boss;
}

let loading: Promise<typeof import('pg-boss')> | undefined;

/**
 * pg-boss, loaded once. Not at import: only a distributed run needs it, and it weighs on any process that loads it
 * (docs/benchmarks.md#figures-the-code-cites). A distributed run starts loading it as it waits for the planning lock
 * (`planningLock`), so that a worker's 150–300 ms of module loading overlaps its wait (docs/benchmarks.md#joining-a-run).
 */
export function loadBoss(): Promise<typeof import('pg-boss')> {
  loading ??= import('pg-boss');
  return loading;
}

/** How often a worker's pg-boss looks for jobs whose holder stopped beating (the 30 s pick-up bound: beat + this). */
const SUPERVISE_SECONDS = 5;

/** A job's holder must touch it this often, or it goes back to the queue (pg-boss's lower bound is 10 s). */
export const JOB_HEARTBEAT_SECONDS = 10;

/** pg-boss's schema: the state schema's name with `_jobs`, so that a second state schema has its own queues. */
export function bossSchema(stateSchema: string): string {
  return `${stateSchema}_jobs`;
}

/**
 * One queue per planning of a run (each invocation plans again): its jobs are the run's series not yet over. Parts
 * are joined by "/", which a pipeline's name cannot hold, so that one pipeline's queues are told from another's.
 */
export function queueName(pipeline: string, runId: string, planningNumber: number): string {
  return `${queuePrefix(pipeline)}${runId}/${planningNumber}`;
}

/** What every queue of a pipeline's runs starts with. */
export function queuePrefix(pipeline: string): string {
  return `webdata/${pipeline}/`;
}

/**
 * A series job's id, the same for the same (run, series, planning): planning twice inserts nothing twice (pg-boss
 * skips an id it holds). A later planning of the same run (a resume) is another number, since the earlier job of an
 * unfinished series may be completed or gone.
 */
export function seriesJobId(runId: string, seriesId: string, planningNumber: number): string {
  const hex = createHash('sha256').update(`${runId}\n${seriesId}\n${planningNumber}`).digest('hex');
  // Shaped as a version-8 (custom) UUID, the type pg-boss keys jobs by.
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export interface SeriesJobData {
  series: string;
}

export const queueOptions = {
  // Liveness is the heartbeat's; a series may take hours, so expiry by age only catches a holder that beats but hangs.
  expireInSeconds: 24 * 3600,
  heartbeatSeconds: JOB_HEARTBEAT_SECONDS,
  // Handed back (a stopped or dead worker) as often as it takes: a series is not a task that can fail for good.
  retryLimit: 1_000_000,
  retryDelay: 0,
  deleteAfterSeconds: 7 * 24 * 3600,
} as const;

/**
 * pg-boss statements on the pool, or on one connection (a transaction of ours). The driver's result goes back as it
 * is: for a text of several statements it is one result per statement, which pg-boss reads as such.
 */
export function adapter(on: Pool | PoolClient): Db {
  return {
    executeSql: (text: string, values?: unknown[]) => on.query(text, values) as Promise<{ rows: unknown[] }>,
  };
}
