import type { Interval } from './history.ts';

/**
 * A series' move rate: the probability that its tracked ranks move in one run, estimated from the intervals between
 * its fetches (docs/design.md#the-refresh-planner). Moves are taken to come as a series' own coin, tossed once a run
 * (a Bernoulli process, the discrete form of Cho and Garcia-Molina's Poisson changes, "Estimating frequency of
 * change", 2003): an interval of g runs shows a move with probability 1 − (1 − p)^g, and one that shows none says
 * (1 − p)^g. Several moves in one interval show as one, so a rate counted as moves over runs would be biased low for
 * a series fetched seldom; the likelihood of the intervals is not. A Beta prior (by default centred on the rate of
 * every series planned together) keeps a series seen once from being judged certain either way. The posterior is
 * computed on a fixed grid of rates: no closed form exists for intervals of different lengths, and a grid is exact
 * enough, deterministic and cheap (GRID points per kind of interval: its gap and whether it moved).
 */

/** A Beta prior on the rate, as its mean and its weight (the runs' worth of evidence it counts for). */
export interface RatePrior {
  mean: number;
  weight: number;
}

export interface RateEstimate {
  /** The posterior mean: the probability that the series moves in the next run. */
  rate: number;
  /** The posterior's standard deviation: how little is known (1/√12 ≈ 0.29 knows nothing). */
  spread: number;
  /** The intervals the estimate rests on. */
  intervals: number;
}

const GRID = 120;
/** Rates from about 0.00002 to 0.996, denser near 0 where most series live: ((k + ½) / GRID)². */
const RATES = Array.from({ length: GRID }, (_, k) => ((k + 0.5) / GRID) ** 2);
/** Each point's share of [0, 1] (the grid's Jacobian, 2u du). */
const WIDTHS = RATES.map((_, k) => (2 * (k + 0.5)) / GRID / GRID);
const LOG_STAY = RATES.map((p) => Math.log1p(-p));

/** The rate's posterior given a series' intervals and the prior. */
export function estimateRate(intervals: readonly Interval[], prior: RatePrior): RateEstimate {
  const a = Math.max(prior.mean * prior.weight, 1e-6);
  const b = Math.max((1 - prior.mean) * prior.weight, 1e-6);
  const kinds = counted(intervals);
  const logs = RATES.map((p, k) => {
    let log = (a - 1) * Math.log(p) + (b - 1) * (LOG_STAY[k] as number) + Math.log(WIDTHS[k] as number);
    for (const { gap, moved, count } of kinds) {
      const stay = gap * (LOG_STAY[k] as number);
      log += count * (moved ? Math.log(-Math.expm1(stay)) : stay);
    }
    return log;
  });
  const top = Math.max(...logs);
  const weights = logs.map((log) => Math.exp(log - top));
  const total = weights.reduce((sum, w) => sum + w, 0);
  const rate = weights.reduce((sum, w, k) => sum + w * (RATES[k] as number), 0) / total;
  const second = weights.reduce((sum, w, k) => sum + w * (RATES[k] as number) ** 2, 0) / total;
  return { rate, spread: Math.sqrt(Math.max(0, second - rate * rate)), intervals: intervals.length };
}

/**
 * The intervals as counts of each kind (gap, moved), in one order: two series with the same intervals in another
 * order get the same estimate to the last bit, so that a tie between them is broken by id and not by rounding.
 */
function counted(intervals: readonly Interval[]): { gap: number; moved: boolean; count: number }[] {
  const counts = new Map<string, { gap: number; moved: boolean; count: number }>();
  for (const { gap, moved } of intervals) {
    const key = `${gap}:${moved}`;
    const kind = counts.get(key);
    if (kind) kind.count += 1;
    else counts.set(key, { gap, moved, count: 1 });
  }
  return [...counts.values()].sort((x, y) => x.gap - y.gap || Number(x.moved) - Number(y.moved));
}

/** The prior's default weight: two runs' worth of evidence, so that one interval already counts for a third. */
export const PRIOR_WEIGHT = 2;
/** The prior's mean when no series planned together has been fetched twice yet. */
export const UNKNOWN_RATE = 0.1;

/**
 * The prior for series planned together: centred on the rate of all of them pooled (as if one series), so that a
 * keyword list of still rankings does not start every new series at a rate only a volatile list would have.
 */
export function pooledPrior(all: readonly (readonly Interval[])[], weight = PRIOR_WEIGHT): RatePrior {
  const pooled = all.flat();
  if (pooled.length === 0) return { mean: UNKNOWN_RATE, weight };
  return { mean: estimateRate(pooled, { mean: 0.5, weight: 2 }).rate, weight };
}

/** The probability of at least one move in `runs` runs at `rate`. */
export function moveWithin(rate: number, runs: number): number {
  return 1 - (1 - rate) ** runs;
}
