/**
 * What `webdata-etl prune` removes from a state store, and its removal in bounded batches (docs/design.md#retention):
 * the same plan over SQLite and PostgreSQL, each store saying by a `PruneDatabase` how it counts and removes one kind
 * of record. Results tables and their outcomes tables are never touched: they are the user's data, and the analytics
 * views read them together.
 */
import { UNFINISHED } from './interfaces.ts';

/** A run's records, by kind, in the order they are removed: the runs row last, so that a prune cut short finds the run again. */
export const RUN_KINDS = ['series', 'series_state', 'journal', 'run_sinks', 'sightings', 'notifications', 'occurrences', 'workers', 'run_limits', 'run_key_limits', 'runs'] as const;
export type RunKind = (typeof RUN_KINDS)[number];
export type PruneKind = RunKind | 'spend';

/**
 * Statuses of a run that ended by its own rules, having replayed to each of its sinks every journal entry they lacked
 * as it opened: a pruned run's journal entries go only once such a run of the pipeline came after it.
 */
const ENDED_CLEANLY = new Set(['completed', 'budget', 'failed_series']);

/** The rows of one kind a prune counts or removes: one run's, or a pipeline's spend written before `before`. */
export type PruneScope = { pipeline: string; runId: string; before?: never } | { pipeline: string; before: Date; runId?: never };

/** How a store counts and removes a kind's rows in a scope: each removal one short transaction of at most `limit` rows. */
export interface PruneDatabase {
  /** The database as messages name it (no password). */
  readonly label: string;
  /** Which store: a SQLite file keeps the pages it frees for its next rows (VACUUM shrinks it), PostgreSQL its own way. */
  readonly store: 'sqlite' | 'postgres';
  /** The kinds of run records this store keeps (a distributed run's workers and limits: PostgreSQL's alone). */
  readonly runKinds: readonly RunKind[];
  pipelines(): Promise<string[]>;
  /** A pipeline's runs, in the order they were recorded. */
  runsOf(pipeline: string): Promise<{ runId: string; status: string }[]>;
  /** Runs that hold credits of a key's allowance now: at work, whatever their row says. */
  heldRuns(): Promise<ReadonlySet<string>>;
  /** Whether any key's allowance is declared in the store (its spend is read from the ledger). */
  hasAllowances(): Promise<boolean>;
  count(kind: PruneKind, scope: PruneScope): Promise<number>;
  remove(kind: PruneKind, scope: PruneScope, limit: number): Promise<number>;
  /** About how many bytes `rows` rows of `kind` take, by the table's size; null where the store cannot say. */
  bytes(kind: PruneKind, rows: number): Promise<number | null>;
  close(): Promise<void>;
}

/** What a pipeline's retention keeps: its last `runs` runs (undefined: all), and spend of the last `spendDays` days (null: all). */
export interface PrunePolicy {
  pipeline: string;
  runs: number | undefined;
  spendDays: number | null;
}

/** What a prune would remove, or removed: rows by kind (and about how many bytes), and the runs whose records go. */
export interface PruneReport {
  database: string;
  store: 'sqlite' | 'postgres';
  pipelines: { pipeline: string; runs: string[]; kept: number }[];
  rows: Partial<Record<PruneKind, number>>;
  bytes: number | null;
}

interface Step {
  kind: PruneKind;
  scope: PruneScope;
  rows: number;
}

const DAY_MS = 86_400_000;

/** The runs of a pipeline whose records its retention lets go: never the latest, one that may resume, nor one at work. */
function prunableRuns(runs: readonly { runId: string; status: string }[], keep: number, held: ReadonlySet<string>) {
  const latest = runs.findLast((run) => run.status !== 'abandoned');
  const lastClean = runs.findLastIndex((run) => ENDED_CLEANLY.has(run.status));
  return runs
    .slice(0, Math.max(runs.length - keep, 0))
    .map((run, index) => ({ ...run, journal: index < lastClean, latest: run === latest }))
    .filter((run) => !run.latest && !UNFINISHED.has(run.status) && !held.has(run.runId));
}

/** The steps of a prune: what each policy lets go, counted. */
async function plan(db: PruneDatabase, policies: readonly PrunePolicy[], now: Date): Promise<{ steps: Step[]; report: PruneReport }> {
  const held = await db.heldRuns();
  const steps: Step[] = [];
  const report: PruneReport = { database: db.label, store: db.store, pipelines: [], rows: {}, bytes: null };
  for (const policy of policies) {
    const runs = await db.runsOf(policy.pipeline);
    const pruned = policy.runs === undefined ? [] : prunableRuns(runs, policy.runs, held);
    report.pipelines.push({ pipeline: policy.pipeline, runs: pruned.map((run) => run.runId), kept: runs.length - pruned.length });
    for (const run of pruned) {
      for (const kind of db.runKinds) {
        if (kind === 'journal' && !run.journal) continue;
        const scope = { pipeline: policy.pipeline, runId: run.runId };
        steps.push({ kind, scope, rows: await db.count(kind, scope) });
      }
    }
    if (policy.spendDays !== null) {
      const scope = { pipeline: policy.pipeline, before: new Date(now.getTime() - policy.spendDays * DAY_MS) };
      steps.push({ kind: 'spend', scope, rows: await db.count('spend', scope) });
    }
  }
  await tally(db, report, steps.map((step) => [step.kind, step.rows] as const));
  return { steps, report };
}

/** Rows by kind, and their bytes where the store can say. */
async function tally(db: PruneDatabase, report: PruneReport, rows: readonly (readonly [PruneKind, number])[]): Promise<void> {
  for (const [kind, n] of rows) if (n > 0) report.rows[kind] = (report.rows[kind] ?? 0) + n;
  let bytes: number | null = 0;
  for (const [kind, n] of Object.entries(report.rows) as [PruneKind, number][]) {
    const of = await db.bytes(kind, n);
    bytes = of === null || bytes === null ? null : bytes + of;
  }
  report.bytes = bytes;
}

export interface PruneOptions {
  /** Remove (else count only: a dry run). */
  apply: boolean;
  /** Rows a transaction removes at most. */
  batch?: number;
  now?: Date;
  /** Awaited after each batch's transaction: nothing of the prune is held meanwhile (a test's live run commits here). */
  afterBatch?: () => Promise<void> | void;
}

export const PRUNE_BATCH = 1000;

/**
 * What the policies let go in `db`: counted (a dry run), or removed in batches of `batch` rows, each batch its own
 * short transaction, so that a live run's commits interleave with them. The report says what was removed (or would be).
 */
export async function prune(db: PruneDatabase, policies: readonly PrunePolicy[], options: PruneOptions): Promise<PruneReport> {
  const { steps, report } = await plan(db, policies, options.now ?? new Date());
  if (!options.apply) return report;
  const batch = options.batch ?? PRUNE_BATCH;
  const removed: [PruneKind, number][] = [];
  for (const step of steps) {
    if (step.rows === 0) continue;
    for (;;) {
      const n = await db.remove(step.kind, step.scope, batch);
      removed.push([step.kind, n]);
      await options.afterBatch?.();
      if (n < batch) break;
    }
  }
  const done: PruneReport = { ...report, rows: {} };
  await tally(db, done, removed);
  return done;
}
