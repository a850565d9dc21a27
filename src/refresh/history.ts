/**
 * What the refresh planner knows of a series: its runs, oldest first, each fetched or not, and when fetched the best
 * rank of each tracked domain (or null: not found within the `searched` ranks that run searched). And what the issue
 * calls a *move* (docs/design.md#the-refresh-planner): a tracked domain changing rank by 3 or more, or entering or
 * leaving the depth fetched.
 */

/** A tracked domain's best rank in one fetched run of a series. */
export interface TrackedRank {
  domain: string;
  /** 1-based among the series' distinct items; null: not found within `searched`. */
  rank: number | null;
  /** The ranks the run searched (the series' highest rank seen). */
  searched: number;
}

/** One run of a series: fetched (with its tracked ranks) or not. */
export interface SeriesRun {
  fetched: boolean;
  /** Present when fetched. */
  ranks?: readonly TrackedRank[] | undefined;
}

/** A rank change of at least this many places is a move. */
export const MOVE_RANKS = 3;

/**
 * Whether a tracked domain moved between two observations of it: by MOVE_RANKS or more, or found in one and not in
 * the other within the depth the latter searched. A domain found at 45 in one run and not found in a run that searched
 * only 30 ranks may not have moved at all: no move (the planner learns from what it saw, not from what it missed).
 */
export function rankMoved(before: TrackedRank, after: TrackedRank): boolean {
  if (before.rank !== null && after.rank !== null) return Math.abs(after.rank - before.rank) >= MOVE_RANKS;
  if (before.rank === null && after.rank !== null) return after.rank <= before.searched;
  if (before.rank !== null && after.rank === null) return before.rank <= after.searched;
  return false;
}

/** Whether any tracked domain moved between two fetched runs (domains seen in only one of them are not compared). */
export function runsMoved(before: readonly TrackedRank[], after: readonly TrackedRank[]): boolean {
  const earlier = new Map(before.map((rank) => [rank.domain, rank]));
  return after.some((rank) => {
    const was = earlier.get(rank.domain);
    return was !== undefined && rankMoved(was, rank);
  });
}

/** Two consecutive fetches of a series, `gap` runs apart, and whether its tracked ranks moved between them. */
export interface Interval {
  gap: number;
  moved: boolean;
}

/** The intervals between a series' consecutive fetches, oldest first. */
export function intervalsOf(history: readonly SeriesRun[]): Interval[] {
  const intervals: Interval[] = [];
  let last: { at: number; ranks: readonly TrackedRank[] } | undefined;
  history.forEach((run, at) => {
    if (!run.fetched) return;
    const ranks = run.ranks ?? [];
    if (last) intervals.push({ gap: at - last.at, moved: runsMoved(last.ranks, ranks) });
    last = { at, ranks };
  });
  return intervals;
}

/** Runs since the series was last fetched, not counting the run being planned: 0 when the last run fetched it; null: never fetched. */
export function runsSkipped(history: readonly SeriesRun[]): number | null {
  for (let at = history.length - 1; at >= 0; at--) if (history[at]?.fetched) return history.length - 1 - at;
  return null;
}
