import type { Lease, StateStore } from '../state/interfaces.ts';
import type { Hosting } from './hosting.ts';
import type { RunHost } from './run-host.ts';

/**
 * Pages committing at once, in order. On the commit thread, pages that wait there commit together in one transaction,
 * so a wider window saves COMMITs (measured: docs/benchmarks.md#figures-the-code-cites). (Permits still bound the pages
 * paid for and not committed to the concurrency.)
 */
const COMMIT_WINDOW = 8;

/**
 * This process alone (docs/design.md#the-run-host): the source's own series, in-process limits, the journal's next
 * number as the commit fence, and the pipeline's lease, let go when it leaves.
 */
export function localHost(store: StateStore, lease: Lease): RunHost {
  return {
    store,
    commitWindow: COMMIT_WINDOW,
    claimsKeys: false,
    sharesSeries: false,
    limits: {},
    member: undefined,
    beforePage: async () => undefined,
    lapsed: () => false,
    seriesOver: async () => undefined,
    seriesEnded: async () => undefined,
    seriesLost: async () => undefined,
    watch: () => undefined,
    othersAtWork: async () => false,
    share: () => undefined,
    async leave() {
      await lease.release();
    },
  };
}

/** A run this process alone runs (docs/design.md#the-run-host): decided under the pipeline's lease, which its host keeps. */
export function localHosting(store: StateStore): Hosting {
  return {
    shared: false,
    async hold(pipeline, decide) {
      const lock = await store.lease(pipeline);
      try {
        return { lock, decided: await decide() };
      } catch (error) {
        await lock.release();
        throw error;
      }
    },
    atWork: async () => false,
    host: async (_run, lock) => localHost(store, lock),
  };
}
