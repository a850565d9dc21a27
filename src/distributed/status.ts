import { type Pool } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import { STALE_SECONDS, workerLockPrefix } from './liveness.ts';
import { statusStatements } from './statements.ts';

/** Where a pipeline's latest run stands, and who works it: `webdata-etl status`. */
export interface RunStatusReport {
  runId: string;
  status: string;
  startedAt: string;
  invocations: number;
  series: { total: number; ended: number; stopped: number };
  pages: number;
  rows: number;
  credits: { spent: number; uncertain: number; reserved: number; budget: number | null };
  /** Requests per second of the shared pacer (null: unpaced, or no worker has set it yet). */
  rate: number | null;
  stop: { reason: string; message: string | null } | null;
  /** A pool's keys, each one's shared row (docs/distributed.md#a-pool-of-keys-across-workers); none with one key. */
  keys: KeyStatus[];
  workers: {
    id: string;
    host: string;
    pid: number;
    status: string;
    /** At work now: its liveness lock held and a beat within the stale limit. */
    alive: boolean;
    leader: boolean;
    pages: number;
    credits: number;
    startedAt: string;
    /** Seconds since its last beat, by the database's clock. */
    lastBeatSeconds: number;
  }[];
}

/** A pool's key as its shared row says: its rate, its pause, its share, and its retirements. */
export interface KeyStatus {
  label: string;
  /** Requests per second of its row (null: unpaced). */
  rate: number | null;
  /** Seconds its row is still paused for (0: not paused). */
  pausedSeconds: number;
  credits: { spent: number; reserved: number; share: number | null };
  /** Retired for the run (a 401), and for endpoints (a 402, a 403). */
  retired: { reason: string; message: string | null; path: string | null }[];
}

/** The latest run of `pipeline` in the state schema, with its workers; undefined before its first run. */
export async function runStatus(pool: Pool, schema: string, pipeline: string, seriesTotal: number): Promise<RunStatusReport | undefined> {
  const sql = statusStatements(quoteIdentifier(schema));
  const run = (
    await pool.query<{ run_id: string; status: string; started_at: Date; invocations: number }>(
      sql.latestRun,
      [pipeline],
    )
  ).rows[0];
  if (!run) return undefined;
  const series = (
    await pool.query<{ ended: number; stopped: number; pages: number; rows: number }>(
      sql.series,
      [run.run_id],
    )
  ).rows[0] ?? { ended: 0, stopped: 0, pages: 0, rows: 0 };
  const limits = (
    await pool.query<{ spent: number; uncertain: number; reserved: number; budget: number | null; interval_ms: number; stop_reason: string | null; stop_message: string | null }>(
      sql.limits,
      [run.run_id],
    )
  ).rows[0];
  const workers = await pool.query<{
    worker_id: string;
    host: string;
    pid: number;
    status: string;
    alive: boolean;
    reconnecting: boolean;
    leader: boolean;
    pages: number;
    credits: number;
    started_at: Date;
    last_beat: number;
  }>(
    sql.workers,
    [run.run_id, STALE_SECONDS, workerLockPrefix(schema, run.run_id)],
  );
  const keys = await keyRows(pool, schema, run.run_id);
  return {
    runId: run.run_id,
    status: run.status,
    startedAt: run.started_at.toISOString(),
    invocations: run.invocations,
    series: { total: seriesTotal, ended: series.ended, stopped: series.stopped },
    pages: series.pages,
    rows: series.rows,
    credits: { spent: limits?.spent ?? 0, uncertain: limits?.uncertain ?? 0, reserved: limits?.reserved ?? 0, budget: limits?.budget ?? null },
    rate: limits && limits.interval_ms > 0 ? Math.round((1000 / limits.interval_ms) * 100) / 100 : null,
    stop: limits?.stop_reason ? { reason: limits.stop_reason, message: limits.stop_message } : null,
    keys: keys.length > 1 ? keys : [],
    workers: workers.rows.map((w) => ({
      id: w.worker_id,
      host: w.host,
      pid: w.pid,
      status: w.alive ? 'working' : w.reconnecting && w.status === 'working' ? 'reconnecting' : w.status === 'working' ? 'dead' : w.status,
      alive: w.alive,
      leader: w.alive && w.leader,
      pages: w.pages,
      credits: w.credits,
      startedAt: w.started_at.toISOString(),
      lastBeatSeconds: Math.round(w.last_beat * 10) / 10,
    })),
  };
}

/** The run's keys' rows (none before the schema had them). */
async function keyRows(pool: Pool, schema: string, runId: string): Promise<KeyStatus[]> {
  const s = quoteIdentifier(schema);
  const sql = statusStatements(s);
  if ((await pool.query<{ found: boolean }>(sql.tableExists, [`${s}.run_key_limits`])).rows[0]?.found !== true) return [];
  const { rows } = await pool.query<{
    label: string;
    interval_ms: number;
    paused_seconds: number;
    max_credits: number | null;
    spent: number;
    reserved: number;
    retired_reason: string | null;
    retired_message: string | null;
    retired_paths: Record<string, { reason: string; message: string }> | null;
  }>(sql.keys, [runId]);
  return rows.map((row) => ({
    label: row.label,
    rate: row.interval_ms > 0 ? Math.round((1000 / row.interval_ms) * 100) / 100 : null,
    pausedSeconds: Math.round(row.paused_seconds * 10) / 10,
    credits: { spent: row.spent, reserved: row.reserved, share: row.max_credits },
    retired: [
      ...(row.retired_reason === null ? [] : [{ reason: row.retired_reason, message: row.retired_message, path: null }]),
      ...Object.entries(row.retired_paths ?? {}).map(([path, each]) => ({ reason: String(each.reason), message: String(each.message), path })),
    ],
  }));
}

/** A scheduled occurrence as `status` shows it. */
export interface OccurrenceStatus {
  dueAt: string;
  outcome: string;
  runId: string | null;
  worker: string | null;
  /** When it was claimed, by the store's clock. */
  claimedAt: string;
  note: string | null;
}

/** The pipeline's latest `limit` occurrences, latest first (none before the schema had them). */
export async function latestOccurrences(pool: Pool, schema: string, pipeline: string, limit: number): Promise<OccurrenceStatus[]> {
  const s = quoteIdentifier(schema);
  const sql = statusStatements(s);
  const exists = (await pool.query<{ found: boolean }>(sql.tableExists, [`${s}.occurrences`])).rows[0]?.found === true;
  if (!exists) return [];
  const { rows } = await pool.query<{ due_at: Date; outcome: string; run_id: string | null; worker: string | null; claimed_at: Date; note: string | null }>(sql.occurrences, [pipeline, limit]);
  return rows.map((row) => ({ dueAt: row.due_at.toISOString(), outcome: row.outcome, runId: row.run_id, worker: row.worker, claimedAt: row.claimed_at.toISOString(), note: row.note }));
}
