// The month the refresh replay (refresh-month.ts) is played on: keywords in one country on the simulator's days, one
// tracked domain each, and what each day really was by the simulator's ground truth (src/simulator/days.ts): the
// domain's best rank, the pages a full harvest and depth until found take, and the moves
// (docs/design.md#the-refresh-planner). No HTTP: a fetch is what the ground truth says that day's pages would show.
import { dayList, dayRanking, dayRankOf } from '../../src/simulator/days.ts';
import { resolveSimulatorOptions } from '../../src/simulator/options.ts';
import { unit } from '../../src/simulator/rng.ts';
import { MOVE_RANKS } from '../../src/refresh/history.ts';

export const PER_PAGE = 10;
export const MAX_PAGES = 5;
/** The ranks a full harvest searches: the fetched depth, in or out of which a domain moves. */
export const DEPTH = PER_PAGE * MAX_PAGES;

export interface WorldSeries {
  id: string;
  domain: string;
  /** The domain's best rank each day, null when not within DEPTH (or the list's end). */
  ranks: (number | null)[];
  /** Pages a full harvest of the series takes (the same every day: a move keeps a list's length). */
  fullPages: number;
  /** Results in the list within DEPTH: what a fetch that finds nothing has searched. */
  searchable: number;
  /** Whether the tracked domain moved on each day (day 0: never). */
  moves: boolean[];
}

export interface World {
  seed: number;
  days: number;
  margin: number;
  series: WorldSeries[];
}

/** `keywords` series of the simulator with `seed`, over `days` days from day 0, each tracking one domain of day 0. */
export function buildWorld(seed: number, keywords: number, days: number, margin = 0): World {
  const settings = resolveSimulatorOptions({ seed });
  const series = Array.from({ length: keywords }, (_, i): WorldSeries => {
    const query = { q: `keyword ${i + 1}`, country: 'us', lang: '' };
    const length = dayList(query, settings, 0).length;
    const searchable = Math.min(length, DEPTH);
    // A domain at a rank drawn in 1..50 of day 0 (its best rank may be higher up: domains come more than once).
    const drawn = Math.floor(unit(seed, 'tracked', i) * searchable);
    const domain = (dayRanking(query, settings, 0)[drawn] as { domain: string }).domain;
    const ranks = Array.from({ length: days }, (_, day) => {
      const rank = dayRankOf(query, domain, settings, day);
      return rank !== null && rank <= DEPTH ? rank : null;
    });
    const moves = ranks.map((rank, day) => day > 0 && moved(ranks[day - 1] ?? null, rank));
    // A full harvest ends on a short page: a list of 30 takes pages 1 to 4, the 4th empty.
    const fullPages = Math.min(MAX_PAGES, Math.floor(length / PER_PAGE) + 1);
    return { id: `s${String(i + 1).padStart(4, '0')}`, domain, ranks, fullPages, searchable, moves };
  });
  return { seed, days, margin, series };
}

/** A move by the definition: a rank change of MOVE_RANKS or more, or entering or leaving the fetched depth. */
function moved(before: number | null, after: number | null): boolean {
  if (before === null || after === null) return before !== after;
  return Math.abs(after - before) >= MOVE_RANKS;
}

/** Pages depth until found takes on `day`: to the domain's page plus the margin, the full depth when not found. */
export function untilFoundPages(world: World, series: WorldSeries, day: number): number {
  const rank = series.ranks[day] ?? null;
  return rank === null ? series.fullPages : Math.min(Math.ceil(rank / PER_PAGE) + world.margin, series.fullPages);
}

/** A full day's harvest in pages (credits at a weight of 1). */
export function fullDay(world: World): number {
  return world.series.reduce((sum, s) => sum + s.fullPages, 0);
}
