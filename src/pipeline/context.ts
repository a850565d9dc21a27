import type { SeenKeys, StateWrite } from '../state/interfaces.ts';
import type { Series } from './page.ts';
import { plainRecords, type StateChanges, trackedState, type TrackedState } from '../state/state-changes.ts';
import { TRACK_STATE } from './tracked-domains.ts';

/** What every stage gets besides its pages. */
export interface RunContext {
  readonly runId: string;
  readonly pipeline: string;
  /** Aborts when the run is aborted (not when it merely stops): cancel long work with it. */
  readonly signal: AbortSignal;
  /**
   * A stage's state for one series, kept while the series runs and released when it ends. The runner commits what a
   * page changed in it with that page, so it must be plain JSON data (records, arrays, numbers, strings), changed
   * through the object this returns: an object assigned into it is kept as a copy.
   */
  seriesState<T extends object>(stage: string, series: Series, init: () => T): T;
  /**
   * Keys seen in scopes wider than a series (the state store's; committed with each page). `runScoped: true` keys
   * belong to this run; the others persist across runs. Absent outside the runner.
   */
  seenKeys?(runScoped: boolean): SeenKeys;
}

/** Changes a series writes before its first snapshot: a short series never needs one. */
const CHANGES_BEFORE_SNAPSHOT = 64 * 1024;

interface SeriesEntry {
  stages: Map<string, TrackedState>;
  /** Length of the snapshot last written or restored (0: none), and of the changes written since. */
  snapshotBytes: number;
  changeBytes: number;
}

/**
 * The runner's side of `seriesState`: the states of each series in memory, what each page changed in them committed
 * with it, restored on resume, released when the series ends.
 */
export function seriesStates() {
  const bySeries = new Map<string, SeriesEntry>();
  const entryOf = (seriesId: string) => {
    let entry = bySeries.get(seriesId);
    if (!entry) {
      entry = { stages: new Map(), snapshotBytes: 0, changeBytes: 0 };
      bySeries.set(seriesId, entry);
    }
    return entry;
  };
  return {
    get<T extends object>(stage: string, series: Series, init: () => T): T {
      const entry = entryOf(series.id);
      let state = entry.stages.get(stage);
      if (state === undefined) {
        state = trackedState(plainRecords(init()) as object);
        state.markAll();
        entry.stages.set(stage, state);
      }
      return state.view as T;
    },
    /**
     * What the series' next commit writes: the page's changes, or a whole snapshot once the changes written since the
     * last one would outweigh it (and 64 KB), so that a series writes O(its state) in all, not O(pages × state), and
     * a resumed one reads no more than about twice its state; a series that ends writes none (it is never resumed)
     * but its tracked ranks, which its run reads as it closes (docs/design.md#where-tracked-ranks-live).
     */
    write(seriesId: string, ends: boolean): StateWrite {
      const entry = bySeries.get(seriesId);
      if (ends) {
        const tracked = entry?.stages.get(TRACK_STATE);
        return { kind: 'snapshot', json: tracked ? JSON.stringify({ [TRACK_STATE]: tracked.root }) : null };
      }
      if (!entry || entry.stages.size === 0) return { kind: 'snapshot', json: null };
      const changes: StateChanges = Object.create(null);
      for (const [stage, state] of entry.stages) {
        const list = state.take();
        if (list.length > 0) changes[stage] = list;
      }
      const json = Object.keys(changes).length > 0 ? JSON.stringify(changes) : null;
      if (entry.changeBytes + (json?.length ?? 0) <= Math.max(entry.snapshotBytes, CHANGES_BEFORE_SNAPSHOT)) {
        entry.changeBytes += json?.length ?? 0;
        return { kind: 'changes', json };
      }
      const snapshot = JSON.stringify(Object.fromEntries([...entry.stages].map(([stage, state]) => [stage, state.root])));
      entry.snapshotBytes = snapshot.length;
      entry.changeBytes = 0;
      return { kind: 'snapshot', json: snapshot };
    },
    /** Puts back what an earlier invocation committed (its snapshot with the changes after it applied). */
    restore(seriesId: string, saved: Record<string, object>): void {
      const entry: SeriesEntry = { stages: new Map(), snapshotBytes: 0, changeBytes: 0 };
      // Already plain records, fresh from the store (applyStateChanges): tracked as they are, not copied again.
      for (const [stage, state] of Object.entries(saved)) entry.stages.set(stage, trackedState(state));
      // The stored changes are not counted: the next snapshot comes once new ones outweigh what was restored.
      entry.snapshotBytes = JSON.stringify(saved).length;
      bySeries.set(seriesId, entry);
    },
    release(seriesId: string): void {
      bySeries.delete(seriesId);
    },
    get size(): number {
      return bySeries.size;
    },
  };
}

export type SeriesStates = ReturnType<typeof seriesStates>;
