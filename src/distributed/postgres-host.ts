import type { RunHost } from '../host/run-host.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';
import { workersAtWork } from './liveness.ts';
import { claimKeyLabels } from './shared-key.ts';
import type { RunWorker } from './worker.ts';

/**
 * A worker of a distributed run as its host (docs/design.md#the-run-host): series from the run's queue, the shared
 * `run_limits` row, a late beat caught up before each page permit, the series-row fence (`RunWorker.store`), and its
 * series handed back when it leaves.
 */
export function postgresHost(worker: RunWorker, run: { store: PostgresStateStore; runId: string; joined: boolean; claimsKeys: boolean }): RunHost {
  const { queue } = worker;
  return {
    store: worker.store,
    // One page at a time: a series another worker took over is found out at its commit.
    commitWindow: 1,
    numbersPages: false,
    claimsKeys: run.claimsKeys,
    sharesSeries: true,
    limits: worker.limits,
    member: { id: worker.id, joined: run.joined },
    feed: (all) => queue.feed(all),
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
