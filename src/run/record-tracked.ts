import type { Series } from '../pipeline/page.ts';
import { TRACK_STATE, type TrackedRank, trackedRanks, type TrackState, type Tracking } from '../pipeline/tracked-domains.ts';
import type { TrackedRow } from '../sinks/series-tracked.ts';
import type { Sink } from '../sinks/sink.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { RunStore } from '../state/interfaces.ts';
import { forEachSlice } from './plan-slices.ts';

/**
 * A series' tracked ranks in a run, as the state store keeps them (docs/design.md#where-tracked-ranks-live): in its
 * stage state under `@track`, committed with each of its pages, kept when it ends. Undefined: the run never fetched
 * a page of it (not reached), or it tracks nothing. What a later reader (a planner) asks of the store by run and series.
 */
export async function seriesTrackedRanks(store: Pick<RunStore, 'progress'>, runId: string, series: Series, domains: readonly string[]): Promise<TrackedRank[] | undefined> {
  if (domains.length === 0) return undefined;
  const state = (await store.progress(runId, series.id))?.state?.[TRACK_STATE] as Partial<TrackState> | undefined;
  return state === undefined ? undefined : trackedRanks(domains, state);
}

/**
 * Records each fetched series' tracked ranks beside the rows of every sink that keeps them (`Sink.tracked`), as the
 * outcomes are: each invocation of the run again, so that what a resume found replaces what an earlier one had. The
 * store is asked a slice of the plan at a time (`forEachSlice`, `seriesProgresses`), as `recordOutcomes` asks it.
 */
export async function recordTracked(parts: { store: RunStore; plan: SourcePlan; runId: string; sinks: readonly Sink<unknown>[]; tracking: Tracking | undefined }): Promise<void> {
  const { store, plan, runId, tracking } = parts;
  const keeping = parts.sinks.filter((sink) => sink.tracked !== undefined);
  if (!tracking || keeping.length === 0) return;
  await forEachSlice(plan, async (slice) => {
    const tracks = slice.filter((series) => tracking.domainsOf(series).length > 0);
    if (tracks.length === 0) return;
    const progresses = new Map((await store.seriesProgresses(runId, tracks.map((series) => series.id))).map((p) => [p.seriesId, p]));
    const rows: TrackedRow[] = [];
    for (const series of tracks) {
      const state = progresses.get(series.id)?.state?.[TRACK_STATE] as Partial<TrackState> | undefined;
      if (state === undefined) continue;
      for (const rank of trackedRanks(tracking.domainsOf(series), state)) rows.push({ query: series.query, country: series.country, lang: series.lang, ...rank });
    }
    if (rows.length === 0) return;
    for (const sink of keeping) await sink.tracked?.(runId, rows);
  });
}

/** One run of a series as a refresh planner reads it: fetched or not, and what it found of its tracked domains. */
export interface TrackedRun {
  readonly runId: string;
  /** The run committed at least one page of the series. */
  readonly fetched: boolean;
  /** Present when fetched: each tracked domain's best rank, or null within `searched`. */
  readonly ranks?: readonly TrackedRank[];
  /** Present when fetched: the pages the run committed of it (what a fetch of it cost: the planner's expected cost). */
  readonly pages?: number;
}

/**
 * A series' history over `runIds` (oldest first: `RunRecords.runs(pipeline)` gives a pipeline's in that order), read from
 * the state store by run and series: what a later refresh planner needs of each series' past
 * (docs/design.md#where-tracked-ranks-live). An abandoned run's series are gone with it: not fetched.
 */
export async function trackedHistory(store: Pick<RunStore, 'progress'>, runIds: readonly string[], series: Series, domains: readonly string[]): Promise<TrackedRun[]> {
  const history: TrackedRun[] = [];
  for (const runId of runIds) {
    const progress = await store.progress(runId, series.id);
    const fetched = progress !== undefined && progress.pages > 0;
    const state = progress?.state?.[TRACK_STATE] as Partial<TrackState> | undefined;
    history.push(fetched ? { runId, fetched, ranks: trackedRanks(domains, state), pages: progress.pages } : { runId, fetched });
  }
  return history;
}
