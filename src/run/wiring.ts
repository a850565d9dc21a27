import type { Client } from '../client/client.ts';
import type { SeriesStates } from '../pipeline/context.ts';
import { createPermits } from '../pipeline/permits.ts';
import type { Budget } from '../schedule/budget.ts';
import type { Clock } from '../schedule/clock.ts';
import { createScheduler, type Scheduler } from '../schedule/scheduler.ts';
import { COMPLETE_REASONS, type SeriesEndReason, type SourceContext } from '../sources/source.ts';
import type { RunRecord, SeenKeyStore, StateStore } from '../state/interfaces.ts';
import type { Series } from '../pipeline/page.ts';
import { SeriesLostError } from '../errors/series-lost-error.ts';
import type { SourcePlan } from '../sources/source.ts';
import { joinRun } from '../distributed/join.ts';
import { atDatabase } from '../postgres/failure.ts';
import type { RunWorker } from '../distributed/worker.ts';
import type { Decision } from './lifecycle.ts';
import type { Held, OpenedRun } from './open-run.ts';
import type { createCommitter } from './commit.ts';
import type { Pipeline } from '../config/define.ts';
import type { RunEvent, RunOptions } from './run-types.ts';

/** The scheduler of a run: the pipeline's rate, concurrency and retries; the budget across all its invocations. */
export function schedulerFor(pipeline: Pipeline, budget: Budget | null, spentBefore: number, clock: Clock | undefined, worker?: RunWorker): Scheduler {
  const rate = pipeline.rate;
  return createScheduler({
    // A worker of a distributed run takes its slots and credits from the run's shared rows (they own the budget).
    ...(worker ? worker.limits : {}),
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
  const stop = () => scheduler.stop('interrupted', 'interrupted by a signal: nothing new is sent; answers in flight are committed');
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
  /** A distributed run's worker: series come from the run's queue, and their jobs are settled as they end. */
  worker?: RunWorker | undefined;
}): SourceWiring {
  const { runId, store, committer, states, keys, previous, retryFailed, emit, worker } = parts;
  const abort = new AbortController();
  const waiting = new Map<string, (result: { new: number; end?: SeriesEndReason }) => void>();
  // Pages paid for and not yet committed: at most the concurrency, run-wide (all sources together).
  const permits = createPermits(parts.scheduler.stats().concurrency);
  const ctx: SourceContext = {
    runId,
    pipeline: parts.pipeline.name,
    signal: abort.signal,
    seriesState: (stage, series, init) => states.get(stage, series, init),
    seenKeys: (runScoped) => keys.view(runScoped),
    client: parts.client,
    scheduler: parts.scheduler,
    async progress(series) {
      // A worker's series may have been paged by another worker (which stopped or died) in this very invocation.
      if (!previous && !worker) return undefined;
      const progress = await store.progress(runId, series.id);
      if (!progress) return undefined;
      const reason = progress.reason as SeriesEndReason | null;
      if (progress.status === 'ended' && reason && (COMPLETE_REASONS.has(reason) || (reason === 'failed' && !retryFailed))) {
        await worker?.queue.done(series.id);
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
    },
    async pagePermit() {
      const release = await permits.acquire(abort.signal);
      await worker?.beatIfLate();
      return release;
    },
    lost: (series) => committer.lost(series.id) || (worker?.queue.lapsed(series.id) ?? false),
    refused: (series) => committer.refused(series.id),
    processed: (page) => new Promise((resolvePage) => waiting.set(page.key, resolvePage)),
    ...(worker ? { feed: (all: Iterator<Series>) => worker.queue.feed(all) } : {}),
    async seriesEnded(series, end) {
      try {
        await committer.seriesEnded(series, end);
      } catch (error) {
        // A worker's series that another took over while this one was ending it: the other's end stands.
        if (!(worker && error instanceof SeriesLostError)) throw error;
        await worker.queue.dropped(series.id);
        return;
      }
      // A worker's series stopped with it goes back to the queue at once; one taken over is the other worker's.
      if (worker && end.reason === 'stopped') await worker.queue.handBack(series.id);
      if (worker && end.reason === 'lost') await worker.queue.dropped(series.id);
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
  };
}

/** Makes this process a worker of its distributed run (`opened.distributed`), holding it in `held` until it leaves. */
export async function joinAsWorker(pipeline: Pipeline, plan: SourcePlan, opened: OpenedRun, decision: Decision, spentBefore: number, held: Held): Promise<RunWorker | undefined> {
  if (!opened.distributed || !held.lease) return undefined;
  const { store } = opened.distributed;
  const joining = {
    pipeline: pipeline.name,
    runId: opened.runId,
    plan,
    distributed: opened.distributed,
    budget: decision.budget?.maxCredits ?? null,
    weights: pipeline.credits.weights,
    spentBefore,
    retryFailed: decision.mode === 'resume' && decision.retryFailed,
    planningLock: held.lease,
  };
  // The job queue's schema and the worker's rows: a failure there is explained as the state store's are.
  held.worker = await atDatabase(`the job queue in ${store.path}`, () => joinRun(joining));
  held.lease = undefined;
  return held.worker;
}
