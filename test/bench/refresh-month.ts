// Spending where answers change (issue 42), at the policy level: a month of 30 daily runs over 300 keywords × 1
// country × up to 5 pages of 10, one tracked domain each, on the simulator's days and by their ground truth
// (refresh-world.ts), without HTTP. A fetch costs the pages depth until found takes that day (margin 0) and sees that
// day's ranks. Each policy spends at most the same budget a run (the first run included):
//   - a full harvest (every series, every page, every run) and depth until found alone (every series, every run);
//   - the refresh planner (src/refresh/plan.ts, maxAgeRuns 7), planning again with what a cheaper fetch left;
//   - round-robin (the series in a cycle, each run going on where the last stopped), with depth until found (the
//     planner's baseline: what choosing by history adds) and with every page (today's harvest, rotated);
//   - the oracle (knows which series move today: the physical limit at that budget).
// A move is a tracked domain changing rank by 3 or more or entering or leaving the 50 ranks; it is caught when the run
// of its day fetches its series in full. Moves on days 1 to 29 (day 0 is the first run's). Several seeds; the aim's
// budget (40 % of a full day) and tighter ones, where the policies part.
// `node scripts/with-node.mjs test/bench/refresh-month.ts [--quick]` (a few seconds; --quick: one seed).
import { buildWorld, fullDay } from './refresh-world.ts';
import { everySeries, oracle, type Outcome, planner, replay, roundRobin } from './refresh-policies.ts';

const KEYWORDS = 300;
const DAYS = 30;
/** The aim's budget, then tighter ones. */
const SHARES = [0.4, 0.2, 0.1];

const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;
const ratio = (a: Outcome, b: Outcome) => (b.caught === 0 ? null : round(a.caught / b.caught, 2));

function figures(outcome: Outcome, fullMonth: number) {
  return {
    credits: outcome.credits,
    shareOfFullHarvest: round(outcome.credits / fullMonth),
    caught: outcome.caught,
    caughtShare: outcome.moves === 0 ? null : round(outcome.caught / outcome.moves),
    maxRunsSkipped: outcome.maxSkipped,
    // Moves of series not yet seen to move by this policy, and of those seen to move before.
    firstMoves: { moves: outcome.firstMoves, caught: outcome.firstCaught },
    laterMoves: { moves: outcome.moves - outcome.firstMoves, caught: outcome.caught - outcome.firstCaught },
  };
}

/** One seed's month: the full harvest, depth until found alone, and each policy at each budget. */
export function refreshMonth(seed: number) {
  const world = buildWorld(seed, KEYWORDS, DAYS);
  const day = fullDay(world);
  const fullMonth = day * DAYS;
  const untilFound = replay(world, Number.POSITIVE_INFINITY, everySeries);
  const budgets = SHARES.map((share) => {
    const budget = Math.floor(day * share);
    const [plan, cycle, limit] = [replay(world, budget, planner()), replay(world, budget, roundRobin), replay(world, budget, oracle)];
    // Round-robin without depth until found: every page of each series it fetches (today's harvest, rotated).
    const cycleFull = replay(world, budget, roundRobin, 'full');
    return {
      share,
      pagesPerRun: budget,
      planner: figures(plan, fullMonth),
      roundRobin: figures(cycle, fullMonth),
      roundRobinFullDepth: figures(cycleFull, fullMonth),
      oracle: figures(limit, fullMonth),
      plannerOverRoundRobin: ratio(plan, cycle),
      plannerOverRoundRobinFullDepth: ratio(plan, cycleFull),
    };
  });
  return {
    seed,
    moves: untilFound.moves,
    seriesThatMove: world.series.filter((s) => s.moves.some(Boolean)).length,
    fullHarvest: { creditsPerDay: day, credits: fullMonth },
    untilFound: { credits: untilFound.credits, saved: round(1 - untilFound.credits / fullMonth) },
    budgets,
  };
}

export function scenarioRefreshMonth(quick: boolean) {
  const seeds = quick ? [1] : [1, 2, 3, 4, 5];
  const months = seeds.map(refreshMonth);
  const at = (share: number) => months.map((m) => m.budgets.find((b) => b.share === share) as (typeof m.budgets)[number]);
  const summary = SHARES.map((share) => ({
    share,
    plannerCaught: { min: Math.min(...at(share).map((b) => b.planner.caughtShare ?? 0)), seeds: at(share).map((b) => b.planner.caughtShare) },
    roundRobinCaught: at(share).map((b) => b.roundRobin.caughtShare),
    roundRobinFullDepthCaught: at(share).map((b) => b.roundRobinFullDepth.caughtShare),
    oracleCaught: at(share).map((b) => b.oracle.caughtShare),
    plannerOverRoundRobin: { min: Math.min(...at(share).map((b) => b.plannerOverRoundRobin ?? 0)), seeds: at(share).map((b) => b.plannerOverRoundRobin) },
    plannerOverRoundRobinFullDepth: { min: Math.min(...at(share).map((b) => b.plannerOverRoundRobinFullDepth ?? 0)), seeds: at(share).map((b) => b.plannerOverRoundRobinFullDepth) },
    maxShareOfFullHarvest: Math.max(...at(share).map((b) => b.planner.shareOfFullHarvest)),
  }));
  return {
    keywords: KEYWORDS,
    days: DAYS,
    maxPages: 5,
    maxAgeRuns: 7,
    untilFoundSaved: months.map((m) => m.untilFound.saved),
    summary,
    months,
  };
}

if (import.meta.main) {
  // Indented, with arrays of plain values on one line (as run.ts prints).
  const text = JSON.stringify(scenarioRefreshMonth(process.argv.includes('--quick')), null, 2);
  process.stdout.write(`${text.replace(/\[\s*\n([^[\]{}]*?)\n\s*\]/g, (_, inner: string) => `[${inner.split('\n').map((line) => line.trim()).join(' ')}]`)}\n`);
}
