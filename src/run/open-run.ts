import { createHash, randomBytes } from 'node:crypto';
import { createPostgresResultsViews, createPostgresSpendView } from '../analytics/postgres-views.ts';
import { applicableViews, createResultsViews, createSpendView } from '../analytics/views.ts';
import { atDatabase } from '../postgres/failure.ts';
import { stateStoreWhere } from '../postgres/target.ts';
import { toJson } from '../json.ts';
import type { ResultsDatabase, Sink } from '../sinks/sink.ts';
import type { SourcePlan } from '../sources/source.ts';
import { checkTagColumns } from '../sources/tag-columns.ts';
import { type Lease, type RunRecord, type StateStore, UNFINISHED } from '../state/interfaces.ts';
import { openStateStore } from '../state/open/open-state-store.ts';
import { releaseSink, takeSink } from './sinks-in-use.ts';
import { dedupesAcrossSeries, distributable } from '../distributed/distributable.ts';
import { postgresHosting } from '../distributed/join.ts';
import type { Hosting } from '../host/hosting.ts';
import { localHosting } from '../host/local-host.ts';
import type { RunHost } from '../host/run-host.ts';
import type { ChangesTable } from '../notify/digest.ts';
import { RunLifecycleError } from '../errors/run-lifecycle-error.ts';
import type { databaseRegistry } from './databases.ts';
import type { Pipeline } from '../config/define.ts';
import { checkTake, type Decision, decide, type LifecycleOptions } from './lifecycle.ts';
import { checkOutputs, stateDatabase, statePath } from './outputs.ts';
import { checkJoinTerms, recordedTerms, runTerms } from './run-terms.ts';
import { type OpeningPlan, recordSkipped } from './refresh-plan.ts';
import type { RefreshExplanation } from './refresh-summary.ts';
import { phase } from '../phase-marks.ts';
import { type Clock, epochOf } from '../schedule/clock.ts';

/** What a run holds and must let go of however it ends: filled as it is taken, so that a failure part way lets go of it. */
export interface Held {
  lease?: Lease | undefined;
  /** Where the run runs, which leaves the run however it ends (and takes over the lease: `hostFor`). */
  host?: RunHost | undefined;
  sinks: Sink<unknown>[];
}

export interface OpenedRun {
  store: StateStore;
  runId: string;
  decision: Decision;
  /** The run this invocation resumes, if it does. */
  previous: RunRecord | undefined;
  startedAt: Date;
  /** Which invocation of the run this is (1: a new run); the workers of one planning share it. */
  invocation: number;
  /** The first results table the runner made a `changes` view over: what a notification's digest reads. */
  changes: ChangesTable | undefined;
  /** Where the run runs, decided once as it opened: this process alone, or a worker of a distributed run. */
  hosting: Hosting;
  /** What the opening holds the pipeline by (the lease, or the planning lock; in `held` too): the host takes it over. */
  lock: Lease;
  /** Whether this process joins workers at work on the run, or decided what the run is. */
  joining: boolean;
  /** A new run's refresh plan, made as it opened (none: the pipeline does not plan, or the run is resumed or joined). */
  opening: OpeningPlan | undefined;
  /** The refresh plan the run opened with, as its terms keep it (a resume's or a joining worker's too). */
  refresh: RefreshExplanation | undefined;
}

/**
 * The first phase of a run (docs/design.md#the-phases-of-a-run): the state store and its lease, what this invocation
 * does (a new run, a resume, `fresh`), the sinks opened (and an abandoned run's rows taken back out of them), and the
 * run recorded.
 */
export async function openRun(
  pipeline: Pipeline,
  plan: SourcePlan,
  options: LifecycleOptions & { stateUrl?: string | undefined; clock?: Clock | undefined },
  databases: ReturnType<typeof databaseRegistry>,
  held: Held,
  declare: (store: StateStore) => Promise<void> = async () => undefined,
  /** A new run's refresh plan (docs/design.md#the-planner-in-runs), made before the run is recorded, with its terms. */
  planning: (store: StateStore, runId: string, decision: Decision) => Promise<OpeningPlan | undefined> = async () => undefined,
): Promise<OpenedRun> {
  const sinks = pipeline.sinks as Sink<unknown>[];
  checkOutputs(sinks, statePath(pipeline));
  checkTagColumns(plan.tagColumns);
  const store = await openStore(pipeline, options, databases);
  phase('store-open');
  // What the run declares of its keys (their allowances: run/allowances.ts), refused before anything is recorded.
  await declare(store);
  const hosting = hostingFor(store, pipeline);
  // Whether this process joins workers at work on the latest run, or decides what the run is: under the pipeline's
  // lease, or a distributed run's planning lock, which stands in for it while this process decides and plans
  // (docs/design.md#past-one-machine).
  const { lock, decided: looked } = await hosting.hold(pipeline.name, async () => {
    const latest = await store.latestRun(pipeline.name);
    return { latest, joining: latest !== undefined && UNFINISHED.has(latest.status) && (await hosting.atWork(latest.runId)) };
  });
  held.lease = lock;
  phase('planning-lock');
  const planPrint = fingerprint(plan.fingerprint);
  const { latest } = looked;
  const joining = latest !== undefined && looked.joining;
  // A scheduled occurrence's invocation starts a run or works a given one, never both (`RunTake`).
  checkTake(options.take, pipeline.name, latest, joining);
  if (joining && options.fresh) {
    throw new RunLifecycleError(`run ${latest.runId} of pipeline "${pipeline.name}" has workers at work: stop them (Ctrl-C, or SIGTERM) before starting it afresh`);
  }
  const terms = runTerms(pipeline, store.database);
  // Joining a run at work: it is resumed as it stands (its budget), and only by a process that shares its plan and its
  // terms, all of them: one with other weights would charge the shared budget by its own, another table split the rows.
  if (joining) checkJoinTerms(latest, { fingerprint: planPrint, data: plan.fingerprint }, terms, options.budget);
  const decision = decide(latest, { fingerprint: planPrint, data: plan.fingerprint, terms }, pipeline.budget ?? null, joining ? {} : options);

  // The analytics views, where the rows of each series are complete (no dedupe wider than the series).
  const seriesComplete = !dedupesAcrossSeries(pipeline.stages);
  const runId = decision.mode === 'resume' ? decision.run.runId : newRunId();
  let changes: ChangesTable | undefined;
  const resultsTable = (at: ResultsDatabase, table: string, mode: 'append' | 'replace' | 'upsert') => {
    const views = applicableViews(mode, seriesComplete);
    if (views.includes('changes')) changes ??= { at, table };
    return at.kind === 'sqlite' ? createResultsViews(at.db, table, views, mode) : createPostgresResultsViews(at.pool, at.schema, table, views, mode);
  };
  const sinkContext = {
    runId,
    pipeline: pipeline.name,
    database: databases.get,
    postgres: databases.postgres,
    stateCheckpoints: store.checkpoints,
    currentSeq: await store.currentSeq(),
    statePath: store.path,
    tagColumns: plan.tagColumns ?? [],
    shared: hosting.shared,
    tracked: pipeline.track !== undefined,
    resultsTable,
  };
  for (const sink of sinks) {
    takeSink(sink);
    try {
      await sink.open(sinkContext);
    } catch (error) {
      releaseSink(sink);
      throw error;
    }
    held.sinks.push(sink);
  }
  phase('sinks-open');
  if (decision.mode === 'new' && decision.abandon) {
    // fresh: the unfinished run's partial rows go; its spend stays on record (it was paid).
    const starts = await store.sinkStarts(decision.abandon.runId);
    for (const sink of held.sinks) await sink.discard?.(decision.abandon.runId, starts.get(sink.id) ?? { seq: 0, bytes: null }, starts);
    await store.abandonRun(decision.abandon.runId, new Date().toISOString());
  }

  const startedAt = new Date();
  const previous = decision.mode === 'resume' ? decision.run : undefined;
  // The store keeps the number.
  const budget = decision.budget?.maxCredits ?? null;
  // The terms as this planning has them (a resume may have changed the rate): what a worker joining it must share.
  let opening: OpeningPlan | undefined;
  if (previous) {
    // A resumed or joined run keeps the plan it opened with (its skipped series are rows of the store).
    terms.refresh = recordedTerms(previous)?.refresh ?? null;
    if (!joining) await store.reopenRun(runId, budget, terms);
  } else {
    opening = await planning(store, runId, decision);
    terms.refresh = opening?.explanation ?? null;
    await store.startRun({ runId, pipeline: pipeline.name, startedAt: startedAt.toISOString(), fingerprint: planPrint, plan: plan.fingerprint, budget, terms });
    if (opening) await recordSkipped(store, runId, opening);
  }
  await store.recordSinkStarts(runId, held.sinks.map((sink) => ({ sinkId: sink.id, seq: sink.held(), bytes: sink.committedBytes?.() ?? null })));
  const invocation = (previous?.invocations ?? 0) + (joining ? 0 : 1);
  return { store, runId, decision, previous, startedAt, invocation, changes, hosting, lock, joining, opening, refresh: terms.refresh ?? undefined };
}

/**
 * Where a run runs, the one place it is decided (docs/design.md#the-run-host): a run whose state and outputs are all in
 * one PostgreSQL database (`distributable`) is a distributed run, every process started on it a worker; any other runs
 * in this process alone, under the pipeline's lease.
 */
export function hostingFor(store: StateStore, pipeline: Pipeline): Hosting {
  const shared = distributable(store, pipeline);
  return shared ? postgresHosting(shared) : localHosting(store);
}

/**
 * The state store, where the pipeline says: a PostgreSQL database (`stateDatabase`), else a SQLite file (the first
 * SQLite sink's file by default: docs/design.md#the-state-store) with the spend view beside it. The one place the
 * runner chooses.
 */
async function openStore(pipeline: Pipeline, options: { stateUrl?: string | undefined; clock?: Clock | undefined }, databases: ReturnType<typeof databaseRegistry>): Promise<StateStore> {
  const target = stateDatabase(pipeline, options.stateUrl);
  if (target) {
    const pool = databases.postgres(target);
    const store = await openStateStore({ kind: 'postgres', pool, target, schema: pipeline.state.schema, pipeline: pipeline.name });
    await atDatabase(stateStoreWhere(target), () => createPostgresSpendView(pool, pipeline.state.schema), pool);
    return store;
  }
  const db = databases.get(statePath(pipeline));
  // A SQLite store's clock is this process's: the run's, which a test may give in virtual time (PostgreSQL's is now()).
  const clock = options.clock;
  const store = await openStateStore({ kind: 'sqlite', db, clock: clock ? () => epochOf(clock) : undefined });
  createSpendView(db);
  return store;
}

/** Sortable by time, unique enough for one pipeline: `2026-11-21T22-30-05-123Z-a1b2c3`. */
function newRunId(): string {
  return `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}`;
}

function fingerprint(plan: Record<string, unknown>): string {
  return createHash('sha256').update(toJson(plan)).digest('hex').slice(0, 32);
}
