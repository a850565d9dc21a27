import { intervalsOf, runsSkipped, type SeriesRun } from './history.ts';
import { estimateRate, moveWithin, pooledPrior, type RatePrior } from './move-rate.ts';

/**
 * The refresh planner (docs/design.md#the-refresh-planner): given a run's budget and every series with its history,
 * which series the run fetches and which it skips, each with why. A pure function: no I/O, no clock, the same answer
 * for the same input (ties broken by id).
 *
 * The order it pays in: first every series never fetched (nothing to judge it by), then every series skipped for
 * `maxAgeRuns` runs (skipping it again would leave it unfetched longer than promised; the longest skipped first),
 * then the rest by the probability that its tracked ranks move in this run, per page it costs. A move is caught only
 * by the first run after it, so what one fetch can catch is this run's move, whatever the series' age: age is what
 * lets a series' rate be learned (an interval of g runs says whether it moved within g), not what it is worth now.
 * Each tier is paid greedily in its order; a series that does not fit what is left is skipped and the next is tried.
 */

export interface PlanSeries {
  /** Unique among the series planned together; ties are broken by it. */
  id: string;
  /** Pages a fetch is expected to take now (depth until found: the pages its last fetch took; a new series, its full depth). */
  cost: number;
  /** Its runs, oldest first, not counting the run being planned. */
  history: readonly SeriesRun[];
}

/** A run's budget in pages, or in credits at the endpoint's weight (credits a page). */
export type PlanBudget = { pages: number } | { credits: number; weight: number };

export interface PlanOptions {
  series: readonly PlanSeries[];
  budget: PlanBudget;
  /** The most runs in a row a series may be skipped (default 7). */
  maxAgeRuns?: number | undefined;
  /** The run's number (1 for a pipeline's first run), carried into the plan for its explanation. */
  run: number;
  /** The move rates' prior; default: centred on the rate of all the series pooled (move-rate.ts). */
  prior?: RatePrior | undefined;
}

/** Why a series is fetched or skipped. */
export type PlanReason =
  /** Fetched: never fetched before. */
  | 'never-fetched'
  /** Fetched: skipped `maxAgeRuns` runs in a row already. */
  | 'overdue'
  /** Fetched: among the most likely to move per page, and the budget had room. */
  | 'likely-to-move'
  /** Skipped: less likely to move per page than those fetched. */
  | 'less-likely-to-move'
  /** Skipped, never fetched yet: the budget could not reach it in this run (it comes first in the next). */
  | 'not-yet-fetched'
  /** Skipped although overdue: the budget could not pay for it (the maxAgeRuns promise broken, worth a warning). */
  | 'budget-exhausted';

export interface SeriesChoice {
  id: string;
  fetch: boolean;
  reason: PlanReason;
  cost: number;
  /** Runs since its last fetch, not counting this one; null: never fetched. */
  runsSkipped: number | null;
  /** The estimated probability that its tracked ranks move in one run (in this one). */
  moveRate: number;
  /** How uncertain that estimate is (the posterior's standard deviation). */
  moveRateSpread: number;
  /** Intervals between fetches the estimate rests on. */
  observedIntervals: number;
  /** The probability that its ranks moved since its last fetch, this run included (1 for a series never fetched). */
  changedSinceFetch: number;
  /** moveRate per page of cost: the order of the value tier. */
  valuePerPage: number;
}

export interface RefreshPlan {
  run: number;
  /** The budget in pages. */
  budget: number;
  /** Pages the series fetched are expected to take (never above the budget). */
  pages: number;
  maxAgeRuns: number;
  /** The prior the rates were estimated with. */
  prior: RatePrior;
  /** Every series, in the order the plan considered them. */
  series: SeriesChoice[];
  fetch: string[];
  skip: string[];
}

export const DEFAULT_MAX_AGE_RUNS = 7;

/** The plan of a run: which series to fetch, which to skip, and why. */
export function planRefresh(options: PlanOptions): RefreshPlan {
  const maxAgeRuns = options.maxAgeRuns ?? DEFAULT_MAX_AGE_RUNS;
  const budget = budgetPages(options.budget);
  check(options, maxAgeRuns);
  const histories = options.series.map((series) => ({ series, intervals: intervalsOf(series.history), skipped: runsSkipped(series.history) }));
  const prior = options.prior ?? pooledPrior(histories.map((h) => h.intervals));
  const judged = histories.map(({ series, intervals, skipped }): Judged => {
    const estimate = estimateRate(intervals, prior);
    const choice: SeriesChoice = {
      id: series.id,
      fetch: false,
      reason: 'less-likely-to-move',
      cost: series.cost,
      runsSkipped: skipped,
      moveRate: estimate.rate,
      moveRateSpread: estimate.spread,
      observedIntervals: estimate.intervals,
      changedSinceFetch: skipped === null ? 1 : moveWithin(estimate.rate, skipped + 1),
      valuePerPage: estimate.rate / series.cost,
    };
    const tier = skipped === null ? 0 : skipped >= maxAgeRuns ? 1 : 2;
    return { choice, tier, waited: series.history.length };
  });
  judged.sort((x, y) => x.tier - y.tier || byTier(x, y));
  let left = budget;
  for (const { choice, tier } of judged) {
    if (choice.cost <= left) {
      choice.fetch = true;
      choice.reason = tier === 0 ? 'never-fetched' : tier === 1 ? 'overdue' : 'likely-to-move';
      left -= choice.cost;
    } else if (tier < 2) choice.reason = tier === 0 ? 'not-yet-fetched' : 'budget-exhausted';
  }
  const series = judged.map((j) => j.choice);
  return {
    run: options.run,
    budget,
    pages: budget - left,
    maxAgeRuns,
    prior,
    series,
    fetch: series.filter((c) => c.fetch).map((c) => c.id),
    skip: series.filter((c) => !c.fetch).map((c) => c.id),
  };
}

/**
 * The order within a tier. Never fetched: the longest waiting first, then the cheapest (more of them paid). Overdue:
 * the longest skipped first, then by value. By value: the most likely to move per page first. Then by id.
 */
function byTier(a: Judged, b: Judged): number {
  const [x, y] = [a.choice, b.choice];
  const ids = x.id < y.id ? -1 : x.id > y.id ? 1 : 0;
  if (a.tier === 0) return b.waited - a.waited || x.cost - y.cost || ids;
  const value = y.valuePerPage - x.valuePerPage;
  if (a.tier === 1) return (y.runsSkipped ?? 0) - (x.runsSkipped ?? 0) || value || ids;
  return value || ids;
}

/** A series judged: its choice so far, its tier (0 never fetched, 1 overdue, 2 by value), the runs it has lived. */
interface Judged {
  choice: SeriesChoice;
  tier: number;
  waited: number;
}

function budgetPages(budget: PlanBudget): number {
  if ('pages' in budget) {
    if (!Number.isFinite(budget.pages) || budget.pages < 0) throw new RangeError(`budget.pages must be a number of pages, 0 or more; got ${budget.pages}`);
    return Math.floor(budget.pages);
  }
  if (!Number.isFinite(budget.credits) || budget.credits < 0) throw new RangeError(`budget.credits must be 0 or more; got ${budget.credits}`);
  if (!Number.isFinite(budget.weight) || budget.weight <= 0) throw new RangeError(`budget.weight must be a number of credits a page above 0; got ${budget.weight}`);
  return Math.floor(budget.credits / budget.weight);
}

function check(options: PlanOptions, maxAgeRuns: number): void {
  if (!Number.isInteger(maxAgeRuns) || maxAgeRuns < 0) throw new RangeError(`maxAgeRuns must be an integer, 0 or more; got ${maxAgeRuns}`);
  const ids = new Set<string>();
  for (const series of options.series) {
    if (ids.has(series.id)) throw new RangeError(`series ids must be unique; ${JSON.stringify(series.id)} comes twice`);
    ids.add(series.id);
    if (!Number.isFinite(series.cost) || series.cost <= 0) throw new RangeError(`series ${JSON.stringify(series.id)}: cost must be a number of pages above 0; got ${series.cost}`);
  }
}
