import type { SeenKeys } from '../state/interfaces.ts';
import type { Series } from './page.ts';

/** What every stage gets besides its pages. */
export interface RunContext {
  readonly runId: string;
  readonly pipeline: string;
  /** Aborts when the run is aborted (not when it merely stops): cancel long work with it. */
  readonly signal: AbortSignal;
  /**
   * A stage's state for one series, kept while the series runs and released when it ends. The runner commits it
   * with the page whose processing changed it, so it must be plain JSON data (records, arrays, numbers, strings).
   */
  seriesState<T extends object>(stage: string, series: Series, init: () => T): T;
  /**
   * Keys seen in scopes wider than a series (the state store's; committed with each page). `runScoped: true` keys
   * belong to this run; the others persist across runs. Absent outside the runner.
   */
  seenKeys?(runScoped: boolean): SeenKeys;
}

/**
 * The runner's side of `seriesState`: an in-memory map per series, serialized into the page's commit, restored on
 * resume, released when the series ends.
 */
export function seriesStates() {
  const bySeries = new Map<string, Map<string, object>>();
  return {
    get<T extends object>(stage: string, series: Series, init: () => T): T {
      let states = bySeries.get(series.id);
      if (!states) {
        states = new Map();
        bySeries.set(series.id, states);
      }
      let state = states.get(stage) as T | undefined;
      if (state === undefined) {
        state = init();
        states.set(stage, state);
      }
      return state;
    },
    /** The series' states as JSON (null when it has none). */
    serialize(seriesId: string): string | null {
      const states = bySeries.get(seriesId);
      return states && states.size > 0 ? JSON.stringify(Object.fromEntries(states)) : null;
    },
    /** Puts back what an earlier invocation committed. */
    restore(seriesId: string, saved: Record<string, object>): void {
      bySeries.set(seriesId, new Map(Object.entries(saved).map(([stage, state]) => [stage, restoreRecord(state)])));
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

/** JSON.parse gives records with Object.prototype; stages key them by arbitrary text ("__proto__" included). */
function restoreRecord(value: object): object {
  if (Array.isArray(value) || value === null || typeof value !== 'object') return value;
  const out = Object.create(null) as Record<string, unknown>;
  for (const [key, inner] of Object.entries(value)) out[key] = inner !== null && typeof inner === 'object' ? restoreRecord(inner) : inner;
  return out;
}
