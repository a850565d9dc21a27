import type { Client } from '../client/client.ts';
import type { SeriesStates } from '../pipeline/context.ts';
import { createPermits } from '../pipeline/permits.ts';
import type { AllowanceMeter } from '../schedule/allowance-meter.ts';
import type { Budget } from '../schedule/budget.ts';
import { type Clock, epochOf, systemClock } from '../schedule/clock.ts';
import type { RateStart } from '../schedule/options.ts';
import { createScheduler, type Scheduler } from '../schedule/scheduler.ts';
import type { SeriesEndReason, SourceContext, SourcePlan } from '../sources/source.ts';
import type { Series } from '../pipeline/page.ts';
import type { RunRecord, SeenKeyStore, StateStore } from '../state/interfaces.ts';
import { SeriesLostError } from '../errors/series-lost-error.ts';
import { pipelineTracking } from './tracking.ts';
import type { RunHost } from '../host/run-host.ts';
import type { createCommitter } from './commit.ts';
import type { Pipeline } from '../config/define.ts';
import type { Destination } from './destination.ts';
import { handedSeries } from './handed-series.ts';
import type { OpenedRun } from './open-run.ts';
import type { RunObserver } from './run-observer.ts';
import type { RunAllowances } from './allowances.ts';
import type { RunEvent, RunOptions } from './run-types.ts';
import { seriesStanding } from './series-standing.ts';
import type { RefreshFeed } from './refresh-feed.ts';
import type { RunRefresh } from './refresh-run.ts';

/** What the wiring sets up for the commit loop. */
export interface WiredRun {
  scheduler: Scheduler;
  source: SourceWiring;
  /** The failure of a spend ledger write, if one failed (`recordSpend`). */
  ledgerFailure: () => unknown;
}

/**
 * The wiring phase (docs/design.md#the-phases-of-a-run): the scheduler under the run's budget, heard by the observer
 * and the host; the spend ledger; what sources see. Then the run's `start` is told, and its gauges reported from there.
 */
export function wireRun(parts: {
  pipeline: Pipeline;
  plan: SourcePlan;
  opened: OpenedRun;
  host: RunHost;
  client: Client;
  /** The run's clients by key label (one per key of a pool; one, `default`, otherwise). */
  clients: ReadonlyMap<string, Client>;
  committer: ReturnType<typeof createCommitter>;
  states: SeriesStates;
  keys: SeenKeyStore;
  spentBefore: number;
  /** Pages the replay delivered. */
  replayed: number;
  destination: Destination;
  observer: RunObserver;
  clock: Clock | undefined;
  /** Where each key's rate controller starts, by label: what the store remembered (remembered-limits.ts). */
  starts?: ReadonlyMap<string, RateStart> | undefined;
  /** The keys' allowances as this run spends them (allowances.ts), and what a spend row says of its key. */
  allowances?: RunAllowances | undefined;
  /** What the run's start says beyond the plan's notes (each key's share of the occurrence: allowance-shares.ts). */
  notes?: readonly string[] | undefined;
  /** A new run's refresh plan in this process: the series in its order, re-planned as they end (refresh-run.ts). */
  refresh?: RunRefresh | undefined;
}): WiredRun {
  const { pipeline, plan, opened, host, committer, spentBefore, observer } = parts;
  const { runId, decision, previous, store } = opened;
  const { emit } = observer;
  const scheduler = schedulerFor(pipeline, decision.budget, spentBefore, parts.clock, host, [...parts.clients.keys()], parts.starts, parts.allowances?.meters);
  scheduler.on(emit);
  host.watch(scheduler);
  const ledgerFailure = recordSpend(scheduler, committer, { runId, pipeline: pipeline.name, spendKey: parts.allowances?.spendKey, clock: parts.clock });
  const retryFailed = decision.mode === 'resume' && decision.retryFailed;
  const { client, clients, states, keys } = parts;
  const source = sourceContext({ pipeline, runId, client, clients, scheduler, store, committer, states, keys, previous, retryFailed, emit, host, refresh: parts.refresh?.feed });
  emit({
    type: 'start',
    runId,
    pipeline: pipeline.name,
    series: plan.seriesCount,
    maxPages: plan.maxPages,
    budget: decision.budget?.maxCredits ?? null,
    spentBefore,
    resumed: previous !== undefined,
    replayed: parts.replayed,
    notes: [...(plan.notes ?? []), ...(parts.notes ?? [])],
    destination: parts.destination,
    ...(host.member ? { worker: host.member } : {}),
  });
  // After `start`, which names a distributed run's worker: its gauges say which worker they come from.
  observer.watch({ stats: () => scheduler.stats(), backlog: source.backlog, fleet: host.fleet });
  return { scheduler, source, ledgerFailure };
}

/** The scheduler of a run: the pipeline's rate, concurrency and retries; the budget across all its invocations. */
export function schedulerFor(
  pipeline: Pipeline,
  budget: Budget | null,
  spentBefore: number,
  clock: Clock | undefined,
  host: RunHost,
  labels: readonly string[] = ['default'],
  starts: ReadonlyMap<string, RateStart> = new Map(),
  allowances: ReadonlyMap<string, AllowanceMeter> = new Map(),
): Scheduler {
  const rate = pipeline.rate;
  return createScheduler({
    // The run's keys, each with the pipeline's rate unless `keys.<label>` says otherwise (docs/pipelines.md#a-pool-of-keys),
    // and its allowance when it has one (docs/credits.md#allowances).
    keys: labels.map((label) => ({ ...keySpec(label, pipeline.keys?.[label], starts.get(label)), ...(allowances.has(label) ? { allowance: allowances.get(label) } : {}) })),
    // Limits shared beyond this process own the budget (docs/design.md#the-run-host); in a pool, each key has its own
    // shared pacer row, share and retirements (docs/distributed.md#a-pool-of-keys-across-workers).
    ...host.limits,
    rate: rate.requestsPerSecond ? { requestsPerSecond: rate.requestsPerSecond } : rate.requests && rate.intervalMs ? { requests: rate.requests, intervalMs: rate.intervalMs } : undefined,
    concurrency: rate.concurrency,
    ...(budget === null ? {} : { budget }),
    // The budget caps the run across all its invocations.
    spentBefore,
    credits: { weights: pipeline.credits.weights },
    ...(pipeline.retry ? { retry: pipeline.retry } : {}),
    ...(pipeline.rateLimit ? { rateLimit: pipeline.rateLimit } : {}),
    ...(clock ? { clock } : {}),
  });
}

/**
 * A key of the pool as the scheduler takes it: its label, what of the pipeline's rate it overrides, and where its rate
 * controller starts (what the store remembered of its limit).
 */
function keySpec(label: string, own: NonNullable<Pipeline['keys']>[string] | undefined, start: RateStart | undefined) {
  return {
    label,
    ...(start === undefined ? {} : { start }),
    ...(own?.requestsPerSecond === undefined ? {} : { rate: { requestsPerSecond: own.requestsPerSecond } }),
    ...(own?.concurrency === undefined ? {} : { concurrency: own.concurrency }),
    ...(own?.maxCredits === undefined ? {} : { maxCredits: own.maxCredits }),
  };
}

/**
 * Every answer's spend into the ledger, with the pipeline and the key it went with (and the allowance's period its
 * credits were held in). Resolves to the failure of a ledger write (a full or locked disk), which fails the run
 * through its own path: the listener runs inside the scheduler, where a throw would be nobody's to catch.
 */
export function recordSpend(
  scheduler: Scheduler,
  committer: ReturnType<typeof createCommitter>,
  run: { runId: string; pipeline: string; spendKey?: RunAllowances['spendKey'] | undefined; clock?: Clock | undefined },
): () => unknown {
  const { runId } = run;
  let failure: unknown;
  const fail = (error: unknown) => {
    failure ??= error;
    scheduler.abort();
  };
  scheduler.on((event) => {
    if (event.type !== 'response' || failure !== undefined) return;
    committer
      .spend({
        runId,
        // The run's wall-clock time (the system's, unless a test gives its own): a SQLite store's clock is the same, and
        // a share of an allowance counts a run's spend since its occurrence by it (run/allowance-shares.ts).
        at: new Date(epochOf(run.clock ?? systemClock)).toISOString(),
        seriesId: event.series,
        path: event.path,
        attempt: event.attempt,
        status: String(event.status),
        credits: event.credits,
        uncertain: event.uncertain,
        latencyMs: Math.round(event.latencyMs),
        pipeline: run.pipeline,
        key: run.spendKey?.(event.key, event.period),
      }, event.page)
      .catch(fail);
  });
  return () => failure;
}

/** The caller's signals: `signal` stops gracefully, `abortSignal` cancels what is in flight. Returns the unsubscribe. */
export function obeySignals(scheduler: Scheduler, options: Pick<RunOptions, 'signal' | 'abortSignal'>): () => void {
  const stop = () => {
    // The command line stops with a word for why: a signal's name, or another cause ("stdout closed (EPIPE)").
    const reason: unknown = options.signal?.reason;
    const why = typeof reason === 'string' && !/^SIG/.test(reason) ? reason : 'interrupted by a signal';
    scheduler.stop('interrupted', `${why}: nothing new is sent; answers in flight are committed`);
  };
  const abortNow = () => scheduler.abort();
  options.signal?.addEventListener('abort', stop, { once: true });
  options.abortSignal?.addEventListener('abort', abortNow, { once: true });
  if (options.signal?.aborted) stop();
  if (options.abortSignal?.aborted) abortNow();
  return () => {
    options.signal?.removeEventListener('abort', stop);
    options.abortSignal?.removeEventListener('abort', abortNow);
  };
}

export interface SourceWiring {
  ctx: SourceContext;
  /** Cancels what sources have in flight. */
  abort: AbortController;
  /** A committed page's outcome, handed back to the series that is waiting for it. */
  processed(key: string, result: { new: number; end?: SeriesEndReason }): void;
  /** Pages paid for and not yet committed, and requests held back until one is (the run's metrics). */
  backlog(): { uncommitted: number; heldBack: number };
  /** Throws when a worker's source pages a series the run's queue did not hand it (handed-series.ts). */
  checkPage(page: { series: Series }): void;
  /** A page of the series was refused as another's: what this process holds of the series goes (`RunHost.seriesLost`). */
  pageLost(seriesId: string): Promise<void>;
}

/** What sources see of the run: its client and scheduler, series progress to resume from, permits, and commits. */
export function sourceContext(parts: {
  pipeline: Pipeline;
  runId: string;
  client: Client;
  clients: ReadonlyMap<string, Client>;
  scheduler: Scheduler;
  store: StateStore;
  committer: ReturnType<typeof createCommitter>;
  states: SeriesStates;
  keys: SeenKeyStore;
  previous: RunRecord | undefined;
  retryFailed: boolean;
  emit: (event: RunEvent) => void;
  /** Where the run runs: which series are this process's, and what comes before a page and after a series. */
  host: RunHost;
  /** The refresh plan's feed: which series are skipped, in what order the others come, told as each ends. */
  refresh?: RefreshFeed | undefined;
}): SourceWiring {
  const { runId, committer, states, keys, emit, host, refresh } = parts;
  const abort = new AbortController();
  const waiting = new Map<string, (result: { new: number; end?: SeriesEndReason }) => void>();
  // Pages paid for and not yet committed: at most the concurrency, run-wide (all sources together).
  const permits = createPermits(parts.scheduler.stats().concurrency);
  // A worker's series as the run's queue hands them, and a page of any other refused (handed-series.ts).
  const handed = handedSeries(host);
  const standing = seriesStanding(parts);
  // Depth until found ends a series on a page after its stages: its source waits for each page's commit (as for no_new).
  const tracking = pipelineTracking(parts.pipeline);
  const ctx: SourceContext = {
    runId,
    pipeline: parts.pipeline.name,
    signal: abort.signal,
    seriesState: (stage, series, init) => states.get(stage, series, init),
    seenKeys: (runScoped) => keys.view(runScoped),
    client: parts.client,
    clientFor: (key) => parts.clients.get(key) ?? parts.client,
    scheduler: parts.scheduler,
    async progress(series) {
      handed.check(series);
      // Skipped by the refresh plan: recorded so as the run opened; nothing to page (a source that ignores the feed too).
      if (refresh?.skips(series.id)) return { done: true };
      const resume = await standing(series);
      if (resume?.done) refresh?.ended();
      // Sources ask just before paging a series: its start, for the run's spans (run-spans.ts) and listeners.
      if (!resume?.done) {
        const { id, endpoint, query, country, lang } = series;
        emit({ type: 'series_start', series: id, endpoint, query, country, lang, resumed: resume !== undefined });
      }
      return resume;
    },
    async pagePermit() {
      const release = await permits.acquire(abort.signal);
      await host.beforePage();
      return release;
    },
    lost: (series) => committer.lost(series.id) || host.lapsed(series.id),
    refused: (series) => committer.refused(series.id),
    processed: (page) => new Promise((resolvePage) => waiting.set(page.key, resolvePage)),
    ...(tracking?.untilFound ? { endsAfterStages: (series: Series) => tracking.domainsOf(series).length > 0 } : {}),
    ...(handed.feed ? { feed: handed.feed } : refresh ? { feed: (all: Iterator<Series>) => refresh.feed(all) } : {}),
    async seriesEnded(series, end) {
      try {
        await committer.seriesEnded(series, end);
      } catch (error) {
        // A series another process took over while this one was ending it: the other's end stands.
        if (!(error instanceof SeriesLostError)) throw error;
        await host.seriesLost(series.id);
        return;
      } finally {
        // Its pages are paid: the refresh plan may hand out what the budget has left (refresh-feed.ts).
        refresh?.ended();
      }
      await host.seriesEnded(series.id, end.reason);
      emit({ type: 'series', series: series.id, reason: end.reason === 'stopped' ? end.stop : end.reason, pages: end.pages });
    },
  };
  return {
    ctx,
    abort,
    processed(key, result) {
      waiting.get(key)?.(result);
      waiting.delete(key);
    },
    backlog: () => ({ uncommitted: permits.held, heldBack: permits.waiting }),
    checkPage: (page) => handed.check(page.series),
    pageLost: (seriesId) => host.seriesLost(seriesId),
  };
}
