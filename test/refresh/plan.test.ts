// The refresh planner's choices on virtual histories (src/refresh/plan.ts; docs/design.md#the-refresh-planner):
// never-fetched series first, overdue ones next, then the likeliest to move per page; the budget never exceeded;
// maxAgeRuns honoured over a long virtual month; a budget that cannot pay even the overdue ones.
import { describe, expect, it } from 'vitest';
import type { SeriesRun } from '../../src/refresh/history.ts';
import { type PlanSeries, planRefresh, type RefreshPlan } from '../../src/refresh/plan.ts';
import { generator } from '../../src/simulator/rng.ts';

const run = (rank: number | null): SeriesRun => ({ fetched: true, ranks: [{ domain: 'example.com', rank, searched: 50 }] });
const skip: SeriesRun = { fetched: false };
/** A history fetched every run, moving (by 5 ranks) on the runs `moving` says. */
const daily = (runs: number, moving: (at: number) => boolean): SeriesRun[] => {
  let rank = 10;
  return Array.from({ length: runs }, (_, at) => {
    if (at > 0 && moving(at)) rank = rank === 10 ? 15 : 10;
    return run(rank);
  });
};
const still = (runs: number) => daily(runs, () => false);
const choice = (plan: RefreshPlan, id: string) => plan.series.find((c) => c.id === id);

describe('the refresh planner', () => {
  it("on a pipeline's first run, fetches the series never fetched as far as the budget goes, in the order of their ids", () => {
    const series = ['c', 'a', 'd', 'b'].map((id) => ({ id, cost: 5, history: [] }));
    const plan = planRefresh({ series, budget: { pages: 12 }, run: 1 });
    expect(plan.fetch).toEqual(['a', 'b']);
    expect(plan.skip).toEqual(['c', 'd']);
    expect(plan.pages).toBe(10);
    expect(choice(plan, 'a')).toMatchObject({ fetch: true, reason: 'never-fetched', runsSkipped: null, changedSinceFetch: 1 });
    expect(choice(plan, 'c')).toMatchObject({ fetch: false, reason: 'not-yet-fetched' });
  });

  it('fetches a series never fetched before a volatile one, and the longest waiting of them first', () => {
    const series: PlanSeries[] = [
      { id: 'volatile', cost: 1, history: daily(10, () => true) },
      { id: 'new', cost: 2, history: [] },
      { id: 'waiting', cost: 2, history: [skip, skip] },
    ];
    const plan = planRefresh({ series, budget: { pages: 2 }, run: 11 });
    expect(plan.fetch).toEqual(['waiting']);
    expect(plan.series.map((c) => c.id)).toEqual(['waiting', 'new', 'volatile']);
  });

  it('fetches a series skipped maxAgeRuns runs in a row before any by value, the longest skipped first', () => {
    const series: PlanSeries[] = [
      { id: 'volatile', cost: 1, history: daily(10, () => true) },
      { id: 'due', cost: 1, history: [...still(3), skip, skip, skip] },
      { id: 'later', cost: 1, history: [...still(4), skip, skip] },
      { id: 'overdue', cost: 1, history: [...still(2), skip, skip, skip, skip] },
    ];
    const plan = planRefresh({ series, budget: { pages: 3 }, maxAgeRuns: 3, run: 7 });
    expect(plan.series.slice(0, 2).map((c) => [c.id, c.reason])).toEqual([
      ['overdue', 'overdue'],
      ['due', 'overdue'],
    ]);
    expect(plan.fetch).toEqual(['overdue', 'due', 'volatile']);
    expect(choice(plan, 'later')).toMatchObject({ fetch: false, reason: 'less-likely-to-move', runsSkipped: 2 });
  });

  it('prefers a series seen to move often to a still one of the same cost', () => {
    const series: PlanSeries[] = [
      { id: 'a-still', cost: 2, history: still(20) },
      { id: 'b-moving', cost: 2, history: daily(20, (at) => at % 3 === 0) },
    ];
    const plan = planRefresh({ series, budget: { pages: 2 }, run: 21 });
    expect(plan.fetch).toEqual(['b-moving']);
    expect(choice(plan, 'b-moving')?.moveRate).toBeGreaterThan((choice(plan, 'a-still')?.moveRate ?? 1) * 3);
    expect(choice(plan, 'b-moving')).toMatchObject({ reason: 'likely-to-move', observedIntervals: 19 });
  });

  it('weighs the probability of a move against the pages it costs', () => {
    const series: PlanSeries[] = [
      { id: 'dear', cost: 5, history: daily(20, () => true) },
      { id: 'cheap', cost: 1, history: daily(20, (at) => at % 2 === 0) },
    ];
    // The dear one moves more often, but not five times as often: the cheap one is worth more per page.
    const plan = planRefresh({ series, budget: { pages: 5 }, run: 21 });
    expect(choice(plan, 'dear')?.moveRate).toBeGreaterThan(choice(plan, 'cheap')?.moveRate ?? 1);
    expect(plan.fetch).toEqual(['cheap']);
    expect(plan.pages).toBe(1);
    // With room for both, both.
    expect(planRefresh({ series, budget: { pages: 6 }, run: 21 }).fetch).toEqual(['cheap', 'dear']);
  });

  it('counts a budget in credits at the weight of the endpoint', () => {
    const series = ['a', 'b', 'c'].map((id) => ({ id, cost: 1, history: [] }));
    const plan = planRefresh({ series, budget: { credits: 7, weight: 3 }, run: 1 });
    expect(plan.budget).toBe(2);
    expect(plan.fetch).toEqual(['a', 'b']);
  });

  it('is deterministic: the same plan whatever the order of the series, ties broken by id', () => {
    const varied: PlanSeries[] = Array.from({ length: 40 }, (_, i) => ({ id: `v${i}`, cost: 1 + (i % 5), history: daily(6 + (i % 7), (at) => (at * (i + 3)) % 7 < i % 4) }));
    const series: PlanSeries[] = [...Array.from({ length: 12 }, (_, i) => ({ id: `s${i}`, cost: 1 + (i % 3), history: i % 4 === 0 ? [] : still(5) })), ...varied];
    const plans = [series, [...series].reverse(), [...series.slice(5), ...series.slice(0, 5)]].map((list) => planRefresh({ series: list, budget: { pages: 40 }, run: 6 }));
    expect(plans[1]).toEqual(plans[0]);
    expect(plans[2]).toEqual(plans[0]);
    // Same history, same cost: by id (as strings).
    expect(plans[0]?.series.filter((c) => c.id.startsWith('s') && c.runsSkipped !== null && c.cost === 2).map((c) => c.id)).toEqual(['s1', 's10', 's7']);
  });

  it('refuses a bad budget, cost, maxAgeRuns or a repeated id, naming it', () => {
    const one = [{ id: 'a', cost: 1, history: [] }];
    expect(() => planRefresh({ series: one, budget: { pages: -1 }, run: 1 })).toThrow(/budget\.pages/);
    expect(() => planRefresh({ series: one, budget: { credits: 5, weight: 0 }, run: 1 })).toThrow(/budget\.weight/);
    expect(() => planRefresh({ series: [{ id: 'a', cost: 0, history: [] }], budget: { pages: 1 }, run: 1 })).toThrow(/"a": cost/);
    expect(() => planRefresh({ series: [...one, ...one], budget: { pages: 1 }, run: 1 })).toThrow(/"a" comes twice/);
    expect(() => planRefresh({ series: one, budget: { pages: 1 }, maxAgeRuns: 1.5, run: 1 })).toThrow(/maxAgeRuns/);
  });
});

/**
 * A virtual month of `runs` runs over series of their own move rates and costs, each run planned on the histories so
 * far and fetched as planned (a fetch sees the series' rank that run). Returns every plan and each series' longest
 * stretch of runs skipped.
 */
function virtualMonth(options: { series: number; runs: number; budget: number; maxAgeRuns: number; seed: number }) {
  const random = generator(options.seed);
  const world = Array.from({ length: options.series }, (_, i) => ({
    id: `k${String(i).padStart(3, '0')}`,
    rate: random() ** 4,
    cost: 1 + Math.floor(random() * 5),
    rank: 10,
    history: [] as SeriesRun[],
    streak: 0,
    longest: 0,
  }));
  const plans: RefreshPlan[] = [];
  for (let at = 0; at < options.runs; at++) {
    for (const series of world) if (random() < series.rate) series.rank = series.rank === 10 ? 20 : 10;
    const plan = planRefresh({ series: world.map(({ id, cost, history }) => ({ id, cost, history })), budget: { pages: options.budget }, maxAgeRuns: options.maxAgeRuns, run: at + 1 });
    plans.push(plan);
    const fetched = new Set(plan.fetch);
    for (const series of world) {
      series.history.push(fetched.has(series.id) ? run(series.rank) : skip);
      series.streak = fetched.has(series.id) ? 0 : series.streak + 1;
      series.longest = Math.max(series.longest, series.streak);
    }
  }
  return { plans, longest: world.map((s) => s.longest), costs: world.map((s) => s.cost) };
}

describe('the refresh planner over a long virtual month', () => {
  it('never exceeds the budget and never leaves a series unfetched more than maxAgeRuns runs', () => {
    // 60 series of 1 to 5 pages: fetching each once every 8 runs takes about 180 / 8 ≈ 23 pages a run; the budget is 30.
    const { plans, longest, costs } = virtualMonth({ series: 60, runs: 90, budget: 30, maxAgeRuns: 7, seed: 42 });
    expect(costs.reduce((a, b) => a + b, 0)).toBeLessThan(8 * 30);
    for (const plan of plans) expect(plan.pages).toBeLessThanOrEqual(30);
    expect(Math.max(...longest)).toBeLessThanOrEqual(7);
    // And it spends the budget: past the first runs, little is left over.
    const spent = plans.slice(10).map((plan) => plan.pages);
    expect(Math.min(...spent)).toBeGreaterThanOrEqual(25);
    // No promise broken once the first runs have fetched every series.
    expect(plans.slice(10).flatMap((plan) => plan.series.filter((c) => c.reason === 'budget-exhausted'))).toEqual([]);
  });

  it('with a budget that cannot pay even the overdue series: pays the longest skipped first, within the budget, and fills what is left', () => {
    // Six series overdue (skipped 3 runs, maxAgeRuns 2) at 3 pages each, one at 1 page not due; 7 pages a run.
    const series: PlanSeries[] = [
      ...['e', 'b', 'f', 'a', 'd', 'c'].map((id, i) => ({ id, cost: 3, history: [...still(2), ...Array.from({ length: 3 + (i % 2) }, () => skip)] })),
      { id: 'z-cheap', cost: 1, history: still(5) },
    ];
    const plan = planRefresh({ series, budget: { pages: 7 }, maxAgeRuns: 2, run: 6 });
    // Skipped 4 runs: b, a, c (ids), then 3 runs: e, f, d. Two fit (6 pages); the 7th page buys the cheap one.
    expect(plan.fetch).toEqual(['a', 'b', 'z-cheap']);
    expect(plan.pages).toBe(7);
    expect(plan.series.filter((c) => c.reason === 'budget-exhausted').map((c) => c.id)).toEqual(['c', 'd', 'e', 'f']);
  });

  it('under a budget too small for maxAgeRuns, still rotates through the overdue series: none starves', () => {
    // 30 series of 1 to 5 pages, maxAgeRuns 3: keeping the promise takes some 90 / 4 pages a run; the budget is 6.
    const { plans, longest, costs } = virtualMonth({ series: 30, runs: 60, budget: 6, maxAgeRuns: 3, seed: 7 });
    for (const plan of plans) expect(plan.pages).toBeLessThanOrEqual(6);
    expect(plans.at(-1)?.series.some((c) => c.reason === 'budget-exhausted')).toBe(true);
    // The overdue are paid the longest skipped first: a series waits maxAgeRuns, then at most a round of the others.
    const round = Math.ceil(costs.reduce((a, b) => a + b, 0) / 6);
    expect(Math.max(...longest)).toBeLessThanOrEqual(round + 3);
    expect(Math.min(...longest)).toBeGreaterThan(3);
  });
});
