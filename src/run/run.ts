import { createHash, randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { applicableViews, createResultsViews, createSpendView } from '../analytics/views.ts';
import { type Client, createClient } from '../client/client.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { throughStages } from '../pipeline/compose.ts';
import { seriesStates } from '../pipeline/context.ts';
import { createPermits } from '../pipeline/permits.ts';
import type { Clock } from '../schedule/clock.ts';
import { createScheduler, type SchedulerEvent } from '../schedule/scheduler.ts';
import type { Sink } from '../sinks/sink.ts';
import { COMPLETE_REASONS, type SeriesEndReason, type SourceContext } from '../sources/source.ts';
import { toJson } from '../json.ts';
import { sinkCheckpoints } from '../state/checkpoints.ts';
import { acquireLease } from '../state/lease.ts';
import { seenKeys } from '../state/seen-keys.ts';
import { openStateStore } from '../state/store.ts';
import { createCommitter } from './commit.ts';
import { databaseRegistry } from './databases.ts';
import { definePipeline, type Pipeline, type PipelineDefinition } from './define.ts';
import { decide, type LifecycleOptions } from './lifecycle.ts';
import { type Destination, type DestinationInput, resolveDestination } from './destination.ts';
import { explainOutputFailure } from './output-error.ts';
import { summarize } from './summarize.ts';
import type { RunSummary } from './summary.ts';

export interface RunOptions extends LifecycleOptions {
  /** Overrides WEBDATA_BASE_URL and the pipeline's `api.baseUrl`. */
  baseUrl?: string | undefined;
  /** Overrides WEBDATA_API_KEY (programmatic use; pipeline files never carry a key). */
  apiKey?: string | undefined;
  token?: string | undefined;
  /** Where WEBDATA_* variables are read; default `process.env`. */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /** Stops the run gracefully: nothing new is sent, answers in flight are committed, the run can be resumed. */
  signal?: AbortSignal | undefined;
  /** Aborts the run: requests in flight are cancelled (what was committed stays). */
  abortSignal?: AbortSignal | undefined;
  /** Progress: scheduler events, and one event per page committed and per series ended. */
  onEvent?: ((event: RunEvent) => void) | undefined;
  clock?: Clock | undefined;
  /** A client to use instead of one built from the options (its owner closes it). */
  client?: Client | undefined;
  /** Who set `baseUrl` and `apiKey`/`token` (e.g. `--base-url`), for the destination shown before the first request. */
  sources?: DestinationInput['sources'];
  /** The file the pipeline came from, named as the address's source when the pipeline decides it. */
  pipelineFile?: string | undefined;
}

export type RunEvent =
  | SchedulerEvent
  | {
      type: 'start';
      runId: string;
      pipeline: string;
      series: number;
      maxPages: number;
      budget: number | null;
      spentBefore: number;
      resumed: boolean;
      replayed: number;
      notes: readonly string[];
      /** Where the key goes: the origin, who chose it, and what credentials. */
      destination: Destination;
    }
  | { type: 'warning'; message: string }
  | { type: 'page'; key: string; series: string; number: number; items: number; served: number; duplicates: number }
  | { type: 'series'; series: string; reason: string; pages: number };

/**
 * Runs a pipeline: plan → scheduler → stages → sinks, one page at a time through the stages, each page committed
 * once and delivered once to every sink. An interrupted run of the same pipeline is resumed where it stopped.
 * Resolves to the run's summary, which is also stored in the `runs` table.
 */
export async function run(definition: PipelineDefinition | Pipeline, options: RunOptions = {}): Promise<RunSummary> {
  const pipeline = definePipeline(definition);
  const env = options.env ?? process.env;
  const plan = pipeline.source.plan();
  const emit = options.onEvent ?? (() => undefined);
  const { client, destination } = options.client
    ? { client: options.client, destination: { origin: new URL(options.client.baseUrl).origin, from: 'the client given to run()', credentials: 'the client’s own' } }
    : buildClient(pipeline, options, env, emit);
  const ownClient = options.client === undefined;
  const databases = databaseRegistry();
  const sinks = pipeline.sinks as Sink<unknown>[];
  const opened: Sink<unknown>[] = [];
  let lease: { release(): void } | undefined;

  try {
    checkOutputs(sinks, statePath(pipeline));
    const store = openStateStore(databases.get(statePath(pipeline)));
    createSpendView(store.db);
    const seriesComplete = !pipeline.stages.some((stage) => {
      const scope = (stage as { dedupeScope?: string }).dedupeScope;
      return scope !== undefined && scope !== 'series';
    });
    lease = acquireLease(store.db, pipeline.name);
    const planPrint = fingerprint(plan.fingerprint);
    const decision = decide(store.latestRun(pipeline.name), { fingerprint: planPrint, data: plan.fingerprint }, pipeline.budget?.maxCredits ?? null, options);

    const sinkContext = {
      pipeline: pipeline.name,
      database: databases.get,
      stateCheckpoints: sinkCheckpoints(store.db),
      currentSeq: store.currentSeq(),
      statePath: store.path,
      tagColumns: plan.tagColumns ?? [],
      // The analytics views, where the rows of each series are complete (no dedupe wider than the series).
      resultsTable: (db: Database.Database, table: string, mode: 'append' | 'replace' | 'upsert') => createResultsViews(db, table, applicableViews(mode, seriesComplete)),
    };
    const runId = decision.mode === 'resume' ? decision.run.runId : newRunId();
    for (const sink of sinks) {
      await sink.open({ ...sinkContext, runId });
      opened.push(sink);
    }
    if (decision.mode === 'new' && decision.abandon) {
      // --fresh: the unfinished run's partial rows go; its spend stays on record (it was paid).
      const starts = store.sinkStarts(decision.abandon.runId);
      for (const sink of opened) await sink.discard?.(decision.abandon.runId, starts.get(sink.id) ?? { seq: 0, bytes: null });
      store.abandonRun(decision.abandon.runId, new Date().toISOString());
    }

    const invocationStart = new Date();
    const previous = decision.mode === 'resume' ? decision.run : undefined;
    if (previous) store.reopenRun(runId, decision.budget);
    else {
      store.startRun({ runId, pipeline: pipeline.name, startedAt: invocationStart.toISOString(), fingerprint: planPrint, plan: plan.fingerprint, budget: decision.budget });
    }
    for (const sink of opened) store.recordSinkStart(runId, sink.id, sink.held?.() ?? store.currentSeq(), sink.committedBytes?.() ?? null);

    const states = seriesStates();
    const keepJournal = pipeline.state.journal === 'keep';
    const keys = seenKeys(store.db, runId);
    const committer = createCommitter({ store, runId, sinks: opened, states, keepJournal, alsoCommit: () => keys.flush() });
    const replayed = await committer.replay();

    const spentBefore = previous ? store.spendOf(runId).spent : 0;
    const scheduler = createScheduler({
      rate: pipeline.rate.requestsPerSecond
        ? { requestsPerSecond: pipeline.rate.requestsPerSecond }
        : pipeline.rate.requests && pipeline.rate.intervalMs
          ? { requests: pipeline.rate.requests, intervalMs: pipeline.rate.intervalMs }
          : undefined,
      concurrency: pipeline.rate.concurrency,
      ...(decision.budget === null ? {} : { budget: { maxCredits: decision.budget } }),
      // The budget caps the run across all its invocations.
      spentBefore,
      credits: { weights: pipeline.credits.weights },
      ...(pipeline.retry ? { retry: pipeline.retry } : {}),
      ...(pipeline.rateLimit ? { rateLimit: pipeline.rateLimit } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
    });
    scheduler.on(emit);
    // A ledger write that fails (a full or locked disk) fails the run, through its own path: the listener runs
    // inside the scheduler, where a throw would be nobody's to catch.
    let ledgerFailure: unknown;
    scheduler.on((event) => {
      if (event.type !== 'response' || ledgerFailure !== undefined) return;
      try {
        committer.spend({
          runId,
          at: new Date().toISOString(),
          seriesId: event.series,
          path: event.path,
          attempt: event.attempt,
          status: String(event.status),
          credits: event.credits,
          uncertain: event.uncertain,
          latencyMs: Math.round(event.latencyMs),
        });
      } catch (error) {
        ledgerFailure = error;
        scheduler.abort();
      }
    });
    emit({
      type: 'start',
      runId,
      pipeline: pipeline.name,
      series: plan.seriesCount,
      maxPages: plan.maxPages,
      budget: decision.budget,
      spentBefore,
      resumed: previous !== undefined,
      replayed,
      notes: plan.notes ?? [],
      destination,
    });

    const stop = () => scheduler.stop('interrupted', 'interrupted by a signal: nothing new is sent; answers in flight are committed');
    const abortNow = () => scheduler.abort();
    options.signal?.addEventListener('abort', stop, { once: true });
    options.abortSignal?.addEventListener('abort', abortNow, { once: true });
    if (options.signal?.aborted) stop();
    if (options.abortSignal?.aborted) abortNow();

    const abort = new AbortController();
    const waiting = new Map<string, (result: { new: number; end?: SeriesEndReason }) => void>();
    const retryFailed = decision.mode === 'resume' && decision.retryFailed;
    // Pages paid for and not yet committed: at most the concurrency, run-wide (all sources together).
    const permits = createPermits(scheduler.stats().concurrency);
    const ctx: SourceContext = {
      runId,
      pipeline: pipeline.name,
      signal: abort.signal,
      seriesState: (stage, series, init) => states.get(stage, series, init),
      seenKeys: (runScoped) => keys.view(runScoped),
      client,
      scheduler,
      progress(series) {
        if (!previous) return undefined;
        const progress = store.progress(runId, series.id);
        if (!progress) return undefined;
        const reason = progress.reason as SeriesEndReason | null;
        if (progress.status === 'ended' && reason && (COMPLETE_REASONS.has(reason) || (reason === 'failed' && !retryFailed))) return { done: true };
        if (progress.state) states.restore(series.id, progress.state);
        committer.resumeSeries(series.id, progress.noNew);
        return {
          done: false,
          nextPage: progress.nextPage ?? undefined,
          pages: progress.pages,
          digest: progress.digest ?? undefined,
          cursor: progress.cursor ?? undefined,
        };
      },
      pagePermit: () => permits.acquire(abort.signal),
      processed: (page) => new Promise((resolvePage) => waiting.set(page.key, resolvePage)),
      seriesEnded(series, end) {
        committer.seriesEnded(series, end);
        emit({ type: 'series', series: series.id, reason: end.reason === 'stopped' ? end.stop : end.reason, pages: end.pages });
      },
    };

    let failure: unknown;
    try {
      for await (const page of throughStages<unknown>(pipeline.source.pages(ctx), pipeline.stages, ctx)) {
        const result = await committer.commit(page);
        waiting.get(page.key)?.(result);
        waiting.delete(page.key);
        emit({
          type: 'page',
          key: page.key,
          series: page.series.id,
          number: page.number,
          items: page.items.length,
          served: page.meta.served,
          duplicates: page.meta.dedupe?.duplicates ?? 0,
        });
      }
    } catch (error) {
      failure = error;
      // Cancel what is in flight: it could not be committed anyway.
      abort.abort(error);
      scheduler.abort();
    } finally {
      options.signal?.removeEventListener('abort', stop);
      options.abortSignal?.removeEventListener('abort', abortNow);
    }
    await scheduler.onIdle();
    failure ??= ledgerFailure;
    if (failure === undefined) committer.flush();

    const finish = () => {
      const finishedAt = new Date();
      return summarize({
        store,
        runId,
        pipeline: pipeline.name,
        seriesTotal: plan.seriesCount,
        stop: scheduler.stopped,
        budgetReached: scheduler.budgetReached,
        budget: decision.budget,
        rateLimitedWaitMs: scheduler.stats().rateLimitedWaitMs + Number(previous?.summary?.rateLimitedWaitMs ?? 0),
        destination,
        outputs: sinks.map((sink) => ({ kind: sink.kind, path: sink.path, delivery: sink.delivery ?? 'exactly_once' })),
        startedAt: previous?.startedAt ?? invocationStart.toISOString(),
        finishedAt: finishedAt.toISOString(),
        durationMs: finishedAt.getTime() - invocationStart.getTime() + Number(previous?.summary?.durationMs ?? 0),
      });
    };
    if (failure !== undefined) {
      try {
        const summary = finish();
        store.finishRun(runId, 'interrupted', summary.finishedAt, summary, failure instanceof Error ? failure.message : String(failure));
      } catch {
        // The disk that failed the run may refuse this too: the run then stays "running", which the next invocation
        // resumes all the same. The failure itself is what the caller must hear about.
      }
      throw failure;
    }
    const summary = finish();
    if (FINISHED.has(summary.status)) {
      for (const sink of opened) await sink.finish?.(runId);
      keys.forgetRun();
    }
    store.finishRun(runId, summary.status, summary.finishedAt, summary);
    return summary;
  } catch (error) {
    // Where the failing write did not say which file it was: SQLite's own errors come from one of its files.
    const sqlite = String((error as { code?: unknown } | undefined)?.code).startsWith('SQLITE_');
    const suspects = sinks.filter((sink) => !sqlite || sink.kind === 'sqlite').map((sink) => sink.path);
    throw explainOutputFailure(error, [...new Set([statePath(pipeline), ...suspects.filter((path) => path !== '-')])].join(', '));
  } finally {
    lease?.release();
    for (const sink of opened) await sink.close();
    databases.closeAll();
    if (ownClient) await client.close();
  }
}

function buildClient(pipeline: Pipeline, options: RunOptions, env: Readonly<Record<string, string | undefined>>, emit: (event: RunEvent) => void) {
  const { baseUrl, apiKey, token, destination } = resolveDestination(pipeline, options, env);
  const warned = new Set<string>();
  const client = createClient({
    baseUrl,
    // Once per run: a server that echoes the key does so in every answer.
    onWarning: (message) => {
      if (warned.has(message)) return;
      warned.add(message);
      emit({ type: 'warning', message });
    },
    ...(apiKey ? { apiKey } : token ? { token } : {}),
    ...(pipeline.api.timeoutMs ? { timeoutMs: pipeline.api.timeoutMs } : {}),
    ...(pipeline.api.userAgent ? { userAgent: pipeline.api.userAgent } : {}),
    ...(pipeline.api.extraCountries ? { extraCountries: pipeline.api.extraCountries } : {}),
    ...(pipeline.api.extraLangs ? { extraLangs: pipeline.api.extraLangs } : {}),
  });
  return { client, destination };
}

/**
 * Two sinks of one pipeline writing the same file or table would interleave (or cut) each other's rows, and a file
 * sink on the state store's own file would corrupt it: refused before anything is opened.
 */
function checkOutputs(sinks: readonly Sink<unknown>[], state: string): void {
  const outputs = sinks.map((sink) => ({ file: sink.path === '-' ? undefined : resolve(sink.path), table: sink.kind === 'sqlite' ? (sink as { table?: string }).table : undefined }));
  const issues: { path: string; message: string }[] = [];
  outputs.forEach((output, index) => {
    if (output.file === undefined) return;
    // SQLite sinks may share a database file, each with its own table; anything else needs the file to itself.
    const clash = outputs.findIndex((other, o) => o < index && other.file === output.file && (other.table === undefined || output.table === undefined || other.table === output.table));
    const where = `${(sinks[index] as Sink<unknown>).path}${output.table ? ` (table "${output.table}")` : ''}`;
    if (clash !== -1) issues.push({ path: `sinks.${index}`, message: `writes ${where}, as sinks.${clash} does: give each sink its own file or table` });
    else if (output.table === undefined && output.file === resolve(state)) {
      issues.push({ path: `sinks.${index}`, message: `writes ${where}, which is the state store: give the sink another file, or state.path another place` });
    }
  });
  if (issues.length > 0) throw new ValidationError('Invalid pipeline outputs', issues);
}

/** Statuses of a run that ended by its own rules (the others resume). */
const FINISHED = new Set(['completed', 'budget', 'failed_series']);

/** The state store lives in the first SQLite sink's file, so that its rows and the state can commit together. */
export function statePath(pipeline: Pipeline): string {
  if (pipeline.state.path) return resolve(pipeline.state.path);
  const sinks = pipeline.sinks as Sink<unknown>[];
  const sqlite = sinks.find((sink) => sink.kind === 'sqlite');
  if (sqlite) return sqlite.path;
  return join(dirname((sinks[0] as Sink<unknown>).path), `${pipeline.name}.state.sqlite`);
}

/** Sortable by time, unique enough for one pipeline: `2026-11-21T22-30-05-123Z-a1b2c3`. */
function newRunId(): string {
  return `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}`;
}

function fingerprint(plan: Record<string, unknown>): string {
  return createHash('sha256').update(toJson(plan)).digest('hex').slice(0, 32);
}
