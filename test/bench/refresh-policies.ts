// The policies the refresh replay (refresh-month.ts) compares, each spending at most a budget of pages a run on a
// World (refresh-world.ts): the planner (src/refresh/plan.ts), round-robin, the oracle, and every series every run.
// A fetch costs the pages depth until found takes that day; one the budget cannot pay in full is cut where the budget
// ends (as a run's budget stop cuts a series) and sees only the ranks it paid for. A move is caught when the run of its
// day fetches its series in full.
import { intervalsOf, type SeriesRun } from '../../src/refresh/history.ts';
import { planRefresh, type PlanOptions } from '../../src/refresh/plan.ts';
import { MAX_PAGES, PER_PAGE, untilFoundPages, type World, type WorldSeries } from './refresh-world.ts';

export interface Outcome {
  credits: number;
  moves: number;
  caught: number;
  /** The most runs in a row any series went unfetched. */
  maxSkipped: number;
  /** Series fetched per run, summed over the month. */
  fetches: number;
  /** Moves of series whose history, as the policy fetched it, had shown no move yet: no estimate can foresee these. */
  firstMoves: number;
  firstCaught: number;
}

/** What one run does on `day`: fetch series while the budget lasts (`fetch` says whether it paid a series in full). */
type RunPolicy = (day: number, fetch: (index: number) => boolean, left: () => number) => void;

/** The memory every policy has of the series: histories (the planner's input), the pages each last took. */
class Memory {
  readonly histories: SeriesRun[][];
  readonly lastPages: (number | undefined)[];
  readonly world: World;
  constructor(world: World) {
    this.world = world;
    this.histories = world.series.map(() => []);
    this.lastPages = world.series.map(() => undefined);
  }

  /** Pages a fetch is expected to take: its last full fetch's, the full depth for a series never fetched. */
  cost(index: number): number {
    return this.lastPages[index] ?? MAX_PAGES;
  }
}

/** Plays `policy` over the world's days with `budget` pages a run, each fetch at `depth`. */
export function replay(world: World, budget: number, policy: (memory: Memory) => RunPolicy, depth: 'until-found' | 'full' = 'until-found'): Outcome {
  const memory = new Memory(world);
  const choose = policy(memory);
  const outcome: Outcome = { credits: 0, moves: 0, caught: 0, maxSkipped: 0, fetches: 0, firstMoves: 0, firstCaught: 0 };
  const seenMoving = world.series.map(() => false);
  const streaks = world.series.map(() => 0);
  for (let day = 0; day < world.days; day++) {
    let left = budget;
    const seen = new Map<number, { run: SeriesRun; whole: boolean }>();
    const fetch = (index: number): boolean => {
      if (seen.has(index) || left <= 0) return false;
      const series = world.series[index] as WorldSeries;
      const needed = depth === 'full' ? series.fullPages : untilFoundPages(world, series, day);
      const paid = Math.min(needed, left);
      left -= paid;
      outcome.credits += paid;
      seen.set(index, { run: { fetched: true, ranks: [observed(series, day, paid, needed)] }, whole: paid === needed });
      if (paid === needed) memory.lastPages[index] = needed;
      return paid === needed;
    };
    choose(day, fetch, () => left);
    world.series.forEach((series, index) => {
      const fetched = seen.get(index);
      const history = memory.histories[index] as SeriesRun[];
      const first = !seenMoving[index];
      history.push(fetched?.run ?? { fetched: false });
      if (fetched) seenMoving[index] = intervalsOf(history).some((interval) => interval.moved);
      streaks[index] = fetched ? 0 : (streaks[index] as number) + 1;
      outcome.maxSkipped = Math.max(outcome.maxSkipped, streaks[index] as number);
      if (!series.moves[day]) return;
      outcome.moves += 1;
      if (fetched?.whole) outcome.caught += 1;
      if (!first) return;
      outcome.firstMoves += 1;
      if (fetched?.whole) outcome.firstCaught += 1;
    });
    outcome.fetches += seen.size;
  }
  return outcome;
}

/** What a fetch of `paid` of the `needed` pages saw of the tracked domain. */
function observed(series: WorldSeries, day: number, paid: number, needed: number) {
  const rank = series.ranks[day] ?? null;
  if (paid === needed) return { domain: series.domain, rank, searched: rank === null ? series.searchable : Math.min(paid * PER_PAGE, series.searchable) };
  return { domain: series.domain, rank: null, searched: paid * PER_PAGE };
}

/** Every series every run (as far as the budget goes). */
export const everySeries = (memory: Memory): RunPolicy => (_day, fetch) => {
  memory.world.series.forEach((_, index) => fetch(index));
};

/** Round-robin: the series in a fixed cycle, each run going on where the last stopped, while the next one fits. */
export const roundRobin = (memory: Memory): RunPolicy => {
  let next = 0;
  const count = memory.world.series.length;
  return (_day, fetch, left) => {
    for (let tried = 0; tried < count && memory.cost(next) <= left(); tried++) {
      fetch(next);
      next = (next + 1) % count;
    }
  };
};

/** The oracle: knows which series move today and what each costs; fetches those, the cheapest first. */
export const oracle = (memory: Memory): RunPolicy => (day, fetch, left) => {
  const { world } = memory;
  const moving = world.series.flatMap((series, index) => (series.moves[day] ? [index] : []));
  moving.sort((a, b) => untilFoundPages(world, world.series[a] as WorldSeries, day) - untilFoundPages(world, world.series[b] as WorldSeries, day) || a - b);
  for (const index of moving) if (untilFoundPages(world, world.series[index] as WorldSeries, day) <= left()) fetch(index);
};

/**
 * The planner, planning again with what is left while a plan fetched something: a fetch that takes fewer pages than
 * expected leaves budget the first plan did not count on (a wired run would do the same as its series end).
 */
export const planner =
  (options: Pick<PlanOptions, 'maxAgeRuns' | 'prior'> = {}) =>
  (memory: Memory): RunPolicy =>
  (day, fetch, left) => {
    const done = new Set<number>();
    for (let pass = 0; pass < 10 && left() > 0; pass++) {
      const series = memory.world.series.flatMap((s, index) => (done.has(index) ? [] : [{ id: s.id, cost: memory.cost(index), history: memory.histories[index] as SeriesRun[], index }]));
      const plan = planRefresh({ ...options, series, budget: { pages: left() }, run: day + 1 });
      if (plan.fetch.length === 0) return;
      const byId = new Map(series.map((s) => [s.id, s.index]));
      for (const id of plan.fetch) {
        const index = byId.get(id) as number;
        done.add(index);
        fetch(index);
      }
    }
  };
