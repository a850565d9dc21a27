import type { RunHost } from '../host/run-host.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';
import { workersAtWork } from './liveness.ts';
import { claimKeyLabels } from './shared-key.ts';
import type { RunWorker } from './worker.ts';
import { UsageError } from '../errors/usage-error.ts';

/** The variable that sets a worker's commit window (`workerCommitWindow`): for measurements, and the tests that hold a wider one. */
export const WORKER_COMMIT_WINDOW_VARIABLE = 'WEBDATA_WORKER_COMMIT_WINDOW';

/**
 * A worker's commit window unless the variable says otherwise: room for the pipeline to run ahead of the server (on a
 * quiet machine (g) at 8 gave 0.68–0.74 of the fastest raw method against 0.46–0.53 at 1: docs/benchmarks.md#postgresql).
 */
export const WORKER_COMMIT_WINDOW = 8;

/**
 * Pages a worker has committing at once (docs/design.md#the-run-host): the journal's number is read before the first
 * page, a page the fence refuses keeps the pages behind it in order, and the pages in the window go down the worker's
 * pipelined connection one behind the other, so that the server runs one page's statement while this process makes
 * the next ones (bench (g), docs/benchmarks.md#postgresql). At 1 the process and the server take turns.
 */
export function workerCommitWindow(env: NodeJS.ProcessEnv = process.env): number {
  const text = env[WORKER_COMMIT_WINDOW_VARIABLE];
  if (text === undefined || text === '') return WORKER_COMMIT_WINDOW;
  const window = Number(text);
  if (!Number.isInteger(window) || window < 1 || window > 64) {
    throw new UsageError(`${WORKER_COMMIT_WINDOW_VARIABLE} must be a whole number of pages from 1 to 64, not ${JSON.stringify(text.slice(0, 40))}`);
  }
  return window;
}

/**
 * A worker of a distributed run as its host (docs/design.md#the-run-host): series from the run's queue, the shared
 * `run_limits` row, a late beat caught up before each page permit, the series-row fence (`RunWorker.store`), and its
 * series handed back when it leaves.
 */
export function postgresHost(worker: RunWorker, run: { store: PostgresStateStore; runId: string; joined: boolean; claimsKeys: boolean; commitWindow: number }): RunHost {
  const { queue } = worker;
  return {
    store: worker.store,
    // A series another worker took over is found out at its commit: its pages behind it in the window are dropped.
    commitWindow: run.commitWindow,
    claimsKeys: run.claimsKeys,
    sharesSeries: true,
    limits: worker.limits,
    member: { id: worker.id, joined: run.joined },
    feed: (all, again) => queue.feed(all, again),
    beforePage: () => worker.beatIfLate(),
    lapsed: (seriesId) => queue.lapsed(seriesId),
    seriesOver: (seriesId) => queue.done(seriesId),
    async seriesEnded(seriesId, reason) {
      // Stopped with this worker, it goes back to the queue at once; one taken over is the other worker's.
      if (reason === 'stopped') await queue.handBack(seriesId);
      if (reason === 'lost') await queue.dropped(seriesId);
    },
    seriesLost: (seriesId) => queue.dropped(seriesId),
    watch: (scheduler) => worker.watch(scheduler),
    othersAtWork: async () => (await workersAtWork(run.store, run.runId)) > 1,
    fleet: async () => ({ workers: await workersAtWork(run.store, run.runId), series: await queue.figures() }),
    claimKeys: (fingerprints) => claimKeyLabels(run.store.pool, run.store.schema, run.runId, fingerprints),
    share: () => worker.share(),
    leave: (status) => worker.leave(status),
  };
}
