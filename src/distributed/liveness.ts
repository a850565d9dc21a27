import { retrying } from '../postgres/failure.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';

/*
 * Who is at work in a distributed run, as SQL conditions on a `workers` row. Two signs, both on the database's side:
 * a worker's liveness lock (an advisory lock on a session of its own, gone with its process's connection) and its
 * beat (`heartbeat_at`, by the database's clock). A server restart takes every session, and so every lock, with it;
 * while it is down nobody can beat. So a lock missing since a restart says nothing of the process, and time the server
 * was down does not count against a beat: a live worker gets the stale limit, from the server's start, to come back.
 */

/** A worker that has not beaten for this long is taken for dead: its series go back to the queue, its reservations into uncertain spend. */
export const STALE_SECONDS = 30;

/** The name of a worker's liveness lock is this and its id. */
export function workerLockPrefix(schema: string, runId: string): string {
  return `webdata-etl:worker:${schema}:${runId}:`;
}

/**
 * A beat within `staleSeconds` (a parameter) of the server's time up: since the last beat, or since the server started
 * if it started after it. Right after a restart, every worker's beat is fresh for that long.
 */
export function beatFresh(staleSeconds: string): string {
  return `greatest(heartbeat_at, pg_postmaster_start_time()) > clock_timestamp() - ${staleSeconds} * interval '1 second'`;
}

/** Its liveness lock (named `prefix` and its id, a parameter) held by a session: pg_locks shows a bigint advisory key as its two halves. */
function lockHeld(prefix: string): string {
  return `EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                   AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(${prefix} || worker_id, 0))`;
}

/** At work now, as `status` shows it: not stopped, its lock held and a fresh beat. */
export function workerAlive(staleSeconds: string, prefix: string): string {
  return `stopped_at IS NULL AND ${beatFresh(staleSeconds)} AND ${lockHeld(prefix)}`;
}

/**
 * May be at work, so that its run must not be planned again, its queue deleted or the worker taken for dead: its lock
 * held (even frozen: its beats will say), or — its session lost with a restart (its last beat before the server's
 * start), not marked dead — within the stale limit of the server's start, while it reconnects (each beat opens its
 * session again before it writes the beat). A lock gone while the server stayed up went with its process.
 */
export function workerMayBeAlive(staleSeconds: string, prefix: string): string {
  return `stopped_at IS NULL AND (${lockHeld(prefix)}
            OR (status <> 'dead' AND heartbeat_at < pg_postmaster_start_time() AND ${beatFresh(staleSeconds)}))`;
}

/** How many workers of a run may be at work (`workerMayBeAlive`). */
export async function workersAtWork(store: PostgresStateStore, runId: string): Promise<number> {
  const s = quoteIdentifier(store.schema);
  const { rows } = await retrying(
    `the state store ${store.path}`,
    () => store.pool.query<{ n: number }>(`SELECT COUNT(*)::int AS n FROM ${s}.workers WHERE run_id = $1 AND ${workerMayBeAlive('$2', '$3')}`, [runId, STALE_SECONDS, workerLockPrefix(store.schema, runId)]),
    { idempotent: true },
  );
  return rows[0]?.n ?? 0;
}
