import type { Client } from '../client/client.ts';
import type { SeriesStates } from '../pipeline/context.ts';
import { createPermits } from '../pipeline/permits.ts';
import type { Budget } from '../schedule/budget.ts';
import type { Clock } from '../schedule/clock.ts';
import { createScheduler, type Scheduler } from '../schedule/scheduler.ts';
import { COMPLETE_REASONS, type SeriesEndReason, type SeriesResume, type SourceContext } from '../sources/source.ts';
import type { Series } from '../pipeline/page.ts';
import type { RunRecord, SeenKeyStore, StateStore } from '../state/interfaces.ts';
import { SeriesLostError } from '../errors/series-lost-error.ts';
import { StageContractError } from '../errors/stage-contract-error.ts';
import type { RunHost } from '../host/run-host.ts';
import type { createCommitter } from './commit.ts';
import type { Pipeline } from '../config/define.ts';
import type { RunEvent, RunOptions } from './run-types.ts';

/** The scheduler of a run: the pipeline's rate, concurrency and retries; the budget across all its invocations. */
export function schedulerFor(pipeline: Pipeline, budget: Budget | null, spentBefore: number, clock: Clock | undefined, host: RunHost): Scheduler {
  const rate = pipeline.rate;
  return createScheduler({
    // Limits shared beyond this process own the budget (docs/design.md#the-run-host).
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
 * Every answer's spend into the ledger. Resolves to the failure of a ledger write (a full or locked disk), which fails
 * the run through its own path: the listener runs inside the scheduler, where a throw would be nobody's to catch.
 */
export function recordSpend(scheduler: Scheduler, committer: ReturnType<typeof createCommitter>, runId: string): () => unknown {
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
        at: new Date().toISOString(),
        seriesId: event.series,
        path: event.path,
        attempt: event.attempt,
        status: String(event.status),
        credits: event.credits,
        uncertain: event.uncertain,
        latencyMs: Math.round(event.latencyMs),
      })
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
  /** Throws when a worker's source pages a series the run's queue did not hand it (see `fedOnly` below). */
  checkPage(page: { series: Series }): void;
}

/** What sources see of the run: its client and scheduler, series progress to resume from, permits, and commits. */
export function sourceContext(parts: {
  pipeline: Pipeline;
  runId: string;
  client: Client;
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
}): SourceWiring {
  const { runId, store, committer, states, keys, previous, retryFailed, emit, host } = parts;
  const abort = new AbortController();
  const waiting = new Map<string, (result: { new: number; end?: SeriesEndReason }) => void>();
  // Pages paid for and not yet committed: at most the concurrency, run-wide (all sources together).
  const permits = createPermits(parts.scheduler.stats().concurrency);
  // A worker pages only the series the run's queue hands it (`ctx.feed`). A source of the user's own that ignores the
  // feed would page every series: the pages of those this worker never took are refused at their commit as another
  // worker's, and the run would end "completed" without them. So such a page fails the run, naming the contract,
  // and is checked before the series' first request where the source asks where it stands (`progress`).
  const handed = new Set<string>();
  const fedOnly = (series: Series) => {
    if (host.feed && !handed.has(series.id)) {
      throw new StageContractError(
        `the source paged series "${series.id}", which the run's queue did not hand this worker: in a distributed run a source must page the series ctx.feed hands it (defineSource's sources do)`,
      );
    }
  };
  const feed = host.feed;
  const tracked: SourceContext['feed'] = feed
    ? (all) => {
        const inner = feed(all);
        return {
          async next() {
            const next = await inner.next();
            if (!next.done) handed.add(next.value.id);
            return next;
          },
          unused: (series) => inner.unused(series),
        };
      }
    : undefined;
  // Where a series stands when a source is about to page it: from its start, from where an earlier invocation (or
  // another process) left it, or done.
  const standing = async (series: Series): Promise<SeriesResume | undefined> => {
    // A series may have been paged by another process (which stopped or died) in this very invocation.
    if (!previous && !host.sharesSeries) return undefined;
    const progress = await store.progress(runId, series.id);
    if (!progress) return undefined;
    const reason = progress.reason as SeriesEndReason | null;
    if (progress.status === 'ended' && reason && (COMPLETE_REASONS.has(reason) || (reason === 'failed' && !retryFailed))) {
      await host.seriesOver(series.id);
      return { done: true };
    }
    if (progress.state) states.restore(series.id, progress.state);
    committer.resumeSeries(series.id, progress.noNew);
    return {
      done: false,
      nextPage: progress.nextPage ?? undefined,
      pages: progress.pages,
      digest: progress.digest ?? undefined,
      cursor: progress.cursor ?? undefined,
    };
  };
  const ctx: SourceContext = {
    runId,
    pipeline: parts.pipeline.name,
    signal: abort.signal,
    seriesState: (stage, series, init) => states.get(stage, series, init),
    seenKeys: (runScoped) => keys.view(runScoped),
    client: parts.client,
    scheduler: parts.scheduler,
    async progress(series) {
      fedOnly(series);
      const resume = await standing(series);
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
    ...(tracked ? { feed: tracked } : {}),
    async seriesEnded(series, end) {
      try {
        await committer.seriesEnded(series, end);
      } catch (error) {
        // A series another process took over while this one was ending it: the other's end stands.
        if (!(error instanceof SeriesLostError)) throw error;
        await host.seriesLost(series.id);
        return;
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
    checkPage: (page) => fedOnly(page.series),
  };
}
