import { retrying } from '../postgres/failure.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';
import { livenessStatements } from './statements.ts';

/*
 * Who is at work in a distributed run: a worker's liveness lock and its beat, both on the database's side (the
 * conditions and why they read as they do: `livenessStatements` in statements.ts).
 */

/**
 * A worker that has not beaten for this long is taken for dead: its series go back to the queue, its reservations into
 * uncertain spend. 30 s; `WEBDATA_STALE_SECONDS` (a whole number of seconds, 8 to 3600) sets it for tests that make a
 * worker late on purpose (docs/distributed.md, "A worker presumed dead"): every worker of a run must be given the same.
 */
export const STALE_SECONDS = staleSeconds(process.env.WEBDATA_STALE_SECONDS);

/** The stale limit a setting asks for: at least two beats and more (a beat is every 3 s), else the default. */
function staleSeconds(setting: string | undefined): number {
  const asked = Number(setting);
  return setting !== undefined && Number.isInteger(asked) && asked >= 8 && asked <= 3600 ? asked : 30;
}

/** The name of a worker's liveness lock is this and its id. */
export function workerLockPrefix(schema: string, runId: string): string {
  return `webdata-etl:worker:${schema}:${runId}:`;
}

/** How many workers of a run may be at work (`workerMayBeAlive`). */
export async function workersAtWork(store: PostgresStateStore, runId: string): Promise<number> {
  const sql = livenessStatements(quoteIdentifier(store.schema));
  const { rows } = await retrying(
    `the state store ${store.path}`,
    () => store.pool.query<{ n: number }>(sql.workersAtWork, [runId, STALE_SECONDS, workerLockPrefix(store.schema, runId)]),
    { idempotent: true },
  );
  return rows[0]?.n ?? 0;
}
