import type { SeriesStates } from '../pipeline/context.ts';
import type { Series } from '../pipeline/page.ts';
import { COMPLETE_REASONS, type SeriesEndReason, type SeriesResume } from '../sources/source.ts';
import type { RunRecord, StateStore } from '../state/interfaces.ts';
import type { RunHost } from '../host/run-host.ts';
import type { createCommitter } from './commit.ts';
import { SKIPPED } from '../sinks/series-outcomes.ts';

/**
 * Where a series stands when a source is about to page it: from its start (none), from where an earlier invocation
 * (or another process) left it, with its stage state and the committer told, or done.
 */
export function seriesStanding(parts: {
  runId: string;
  store: StateStore;
  committer: ReturnType<typeof createCommitter>;
  states: SeriesStates;
  previous: RunRecord | undefined;
  retryFailed: boolean;
  host: RunHost;
}): (series: Series) => Promise<SeriesResume | undefined> {
  const { runId, store, committer, states, previous, retryFailed, host } = parts;
  return async (series) => {
    // A series may have been paged by another process (which stopped or died) in this very invocation.
    if (!previous && !host.sharesSeries) return undefined;
    const progress = await store.progress(runId, series.id);
    if (!progress) return undefined;
    const reason = progress.reason as SeriesEndReason | null;
    // Skipped by the refresh plan the run opened with: a resume, or another worker, keeps its choices.
    if (progress.status === 'ended' && reason && (COMPLETE_REASONS.has(reason) || (reason === 'failed' && !retryFailed) || (reason as string) === SKIPPED)) {
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
}
