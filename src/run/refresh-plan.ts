import type { Pipeline } from '../config/define.ts';
import type { Series } from '../pipeline/page.ts';
import type { PlanSeries, RefreshPlan } from '../refresh/plan.ts';
import type { RatePrior } from '../refresh/move-rate.ts';
import { DEFAULT_MAX_AGE_RUNS, planRefresh } from '../refresh/plan.ts';
import type { SeriesRun } from '../refresh/history.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { RunStore } from '../state/interfaces.ts';
import { trackedHistory } from './record-tracked.ts';
import { pipelineTracking } from './tracking.ts';
import { seriesIdentity } from './series-book.ts';
import { SKIPPED } from '../sinks/series-outcomes.ts';
import type { RefreshExplanation } from './refresh-summary.ts';

/**
 * The refresh planner in a run (docs/design.md#the-planner-in-runs): when a new run opens, each series' history is
 * read from the state store and `planRefresh` says which series this run fetches under its budget in pages; the
 * others are recorded `skipped`. The plan's explanation goes with the run's terms, so that a resume (or a worker
 * joining a distributed run) follows the same choices: the skipped series are rows of the store, ended.
 */

/** The past runs a series' history is read over, at the most: two months of daily runs, enough for its move rate. */
export const HISTORY_RUNS = 60;

/** What a run's opening planned, and what re-planning needs of it (the histories, their costs, the prior). */
export interface OpeningPlan {
  plan: RefreshPlan;
  /** Every series planned, by id, with its history and cost. */
  planned: ReadonlyMap<string, PlanSeries>;
  /** The series skipped as the run opened: their rows are recorded `skipped` (`recordSkipped`). */
  skipped: readonly Series[];
  prior: RatePrior;
  explanation: RefreshExplanation;
}

/** The run's budget in pages: the smaller of the budget's and the spread allowance shares' (null: no bound). */
export function budgetPages(credits: number | null, shareCaps: readonly number[], weight: number): number | null {
  const bounds = [credits, ...(shareCaps.length > 0 ? [shareCaps.reduce((a, b) => a + b, 0)] : [])].filter((b): b is number => b !== null);
  if (bounds.length === 0) return null;
  return Math.floor(Math.min(...bounds) / (weight > 0 ? weight : 1));
}

/**
 * Plans a new run of `pipeline` (priority `changes`): the histories over its last HISTORY_RUNS runs (one
 * `store.progress` per series per past run: fine for thousands of series, the cost is said in docs/design.md), each
 * series' cost, and the plan under `budget` pages. Undefined when the pipeline does not plan.
 */
export async function planOpeningRun(parts: { store: Pick<RunStore, 'progress' | 'runs'>; pipeline: Pipeline; plan: SourcePlan; runId: string; budget: number | null }): Promise<OpeningPlan | undefined> {
  const { store, pipeline, plan } = parts;
  const tracking = pipelineTracking(pipeline);
  if (pipeline.refresh?.priority !== 'changes' || !tracking) return undefined;
  const past = (await store.runs(pipeline.name)).filter((run) => run.status !== 'abandoned' && run.runId !== parts.runId);
  const runIds = past.slice(-HISTORY_RUNS).map((run) => run.runId);
  const planned = new Map<string, PlanSeries>();
  const identities = new Map<string, Series>();
  for (const series of plan.series()) {
    planned.set(series.id, await seriesToPlan(store, runIds, series, tracking.domainsOf(series), plan.maxPages));
    identities.set(series.id, series);
  }
  const maxAgeRuns = pipeline.refresh.maxAgeRuns ?? DEFAULT_MAX_AGE_RUNS;
  // No budget: every series is fetched, and the plan says so (a budget as large as every series' cost).
  const all = [...planned.values()].reduce((sum, s) => sum + s.cost, 0);
  const result = planRefresh({ series: [...planned.values()], budget: { pages: parts.budget ?? all }, maxAgeRuns, run: past.length + 1 });
  const skipped = result.skip.map((id) => identities.get(id) as Series);
  return { plan: result, planned, skipped, prior: result.prior, explanation: explain(result, parts.budget, runIds.length) };
}

/**
 * The series a new run skips, recorded as ended `skipped` before anything is fetched: a resume, a joining worker and a
 * distributed run's queue (which takes no series that ended) follow the plan by them, and the outcomes say it.
 */
export async function recordSkipped(store: Pick<RunStore, 'endSeries'>, runId: string, opening: OpeningPlan): Promise<void> {
  for (const series of opening.skipped) {
    await store.endSeries(runId, seriesIdentity(series), { status: 'ended', reason: SKIPPED, nextPage: null, error: null, errorKind: null });
  }
}

/** A series as the planner takes it: its history over `runIds`, and what a fetch of it costs (its last fetch's pages). */
async function seriesToPlan(store: Pick<RunStore, 'progress'>, runIds: readonly string[], series: Series, domains: readonly string[], maxPages: number): Promise<PlanSeries> {
  const runs = await trackedHistory(store, runIds, series, domains);
  const history: SeriesRun[] = runs.map((run) => (run.fetched ? { fetched: true, ranks: run.ranks } : { fetched: false }));
  const last = runs.findLast((run) => run.fetched);
  return { id: series.id, cost: Math.max(1, Math.min(maxPages, last?.pages ?? maxPages)), history };
}

/** The plan in the words of the summary. */
export function explain(plan: RefreshPlan, budget: number | null, historyRuns: number): RefreshExplanation {
  const chosen: Record<string, number> = {};
  const skipped: Record<string, number> = {};
  for (const choice of plan.series) {
    const counts = choice.fetch ? chosen : skipped;
    counts[choice.reason] = (counts[choice.reason] ?? 0) + 1;
  }
  return {
    priority: 'changes',
    budgetPages: budget,
    expectedPages: plan.pages,
    chosen,
    skipped,
    maxAgeRuns: plan.maxAgeRuns,
    promiseBroken: skipped['budget-exhausted'] ?? 0,
    historyRuns,
  };
}
