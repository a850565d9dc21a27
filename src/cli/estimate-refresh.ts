import { existsSync } from 'node:fs';
import { isPostgresDatabase, openReader, type Reader } from '../analytics/reader.ts';
import type { Pipeline } from '../config/define.ts';
import type { PostgresTarget } from '../postgres/target.ts';
import { describeRefresh, type RefreshExplanation } from '../run/refresh-summary.ts';
import { planNewRun } from '../run/refresh-run.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { RunRecord, RunStore } from '../state/interfaces.ts';
import { seriesProgressFrom } from '../state/rows.ts';
import { estimateRefreshStatements } from './statements.ts';

/**
 * What the refresh plan of the pipeline's next run would fetch and why (`refresh.priority: 'changes'`), from the
 * histories in its state database, read and never written (a file not made yet: no history, every series never
 * fetched). The budget is the pipeline's own (`budget.maxCredits`); a spread allowance's share is `estimate`'s other
 * line. Undefined when the pipeline does not plan.
 */
export async function estimateRefresh(pipeline: Pipeline, plan: SourcePlan, state: string | PostgresTarget): Promise<RefreshExplanation | undefined> {
  if (pipeline.refresh?.priority !== 'changes') return undefined;
  const exists = typeof state !== 'string' || isPostgresDatabase(state) || existsSync(state);
  const reader = exists ? await openReader(state, { stateSchema: pipeline.state.schema }) : undefined;
  try {
    const store = reader && (await reader.exists('runs', 'state')) ? readStore(reader) : emptyStore;
    const opening = await planNewRun({ store, pipeline, plan, runId: '', budget: pipeline.budget ?? null, labels: [], shares: async () => new Map() });
    return opening?.explanation;
  } finally {
    await reader?.close();
  }
}

/** The estimate's lines: "refresh plan (next run): budget 120 pages; 37 series chosen (…); 263 skipped (…); …". */
export function refreshLines(refresh: RefreshExplanation): string[] {
  return [`refresh plan (next run, from the state's history): ${describeRefresh(refresh)}`];
}

const emptyStore: Pick<RunStore, 'progress' | 'runs'> = { progress: async () => undefined, runs: async () => [] };

/** The two reads the planner makes of a state store, over a read-only reader. */
function readStore(reader: Reader): Pick<RunStore, 'progress' | 'runs'> {
  const runs = estimateRefreshStatements.runs(reader.name('runs', 'state'), reader.dialect);
  const series = estimateRefreshStatements.series(reader.name('series', 'state'));
  const changes = estimateRefreshStatements.stateChanges(reader.name('series_state', 'state'));
  return {
    async runs(pipeline) {
      const rows = await reader.all(runs, [pipeline]);
      return rows.map((row) => ({ runId: row.run_id, status: row.status }) as unknown as RunRecord);
    },
    async progress(runId, seriesId) {
      const [row] = await reader.all(series, [runId, seriesId]);
      if (!row) return undefined;
      const after = await reader.all(changes, [runId, seriesId]);
      return seriesProgressFrom(seriesId, row, after.map((r) => r.changes as string));
    },
  };
}
