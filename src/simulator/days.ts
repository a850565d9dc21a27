import { fullItem } from './full-items.ts';
import { hash, pick, unit } from './rng.ts';
import { LAST_DAY } from './last-day.ts';
import { build, pageOf, rankedList, type Result, type ResultSettings, type SearchQuery, type Series } from './search-results.ts';

/**
 * The simulator's days: each series (a query in a country and a language) keeps its ranking from one day to the next
 * unless it moves that day, with a daily probability of its own drawn from a skewed distribution, so that most series
 * move a few times a month and a few nearly every day, as rank trackers see them. A move day changes one to four
 * things: a stretch of results is re-ranked, a result drifts 3 to 12 ranks, a new domain enters, a result leaves. Everything is a pure function of the
 * seed, the series and the day: the same query on the same day is always answered the same, so a month replays
 * exactly, and `ranking` is the ground truth a test or a benchmark measures what a run caught against.
 */

/** The last day the simulator lives to (last-day.ts). */
export { LAST_DAY };

/** One result of a day's ranking, as the ground truth gives it. */
export interface RankedResult {
  /** 1-based rank in the series' whole result list. */
  rank: number;
  url: string;
  /** The URL's host, lower-case, without a port. */
  domain: string;
}

/** Ranks where moves happen: the pages a tracker fetches. */
const MOVE_ZONE = 50;
const FRESH_WORDS = ['shop', 'news', 'guide', 'blog', 'review', 'forum', 'deals', 'wiki', 'hub', 'daily'];

/** The series' daily probability of a move: 0.01 to 0.95, most below 0.05, one series in ten above 0.5. */
export function volatility(seed: number, series: Series): number {
  return 0.01 + 0.94 * unit(seed, series.q, series.country, series.lang, 'volatility') ** 5;
}

/** Whether the series' ranking moves on `day` (never on day 0, the ranking every series starts from). */
export function movesOn(seed: number, series: Series, day: number): boolean {
  return day > 0 && unit(seed, series.q, series.country, series.lang, 'moves', day) < volatility(seed, series);
}

/**
 * A series' lists as far as they were computed: one every STRIDE days (index: day / STRIDE), and the last asked for.
 * A day is computed from the checkpoint or the last list before it, at most STRIDE - 1 days on: setting the day
 * anywhere costs little, and a series living ten years holds 115 lists, not 3,650.
 */
interface SeriesDays {
  checkpoints: Result[][];
  last: { day: number; list: Result[] };
}
const STRIDE = 32;
const days = new Map<string, SeriesDays>();
const SERIES_LIMIT = 1000;

/** The series' whole ranked result list on `day` (0 to LAST_DAY). */
export function dayList(series: Series, settings: ResultSettings, day: number): readonly Result[] {
  if (!Number.isInteger(day) || day < 0 || day > LAST_DAY) throw new RangeError(`day must be an integer from 0 to ${LAST_DAY}; got ${day}`);
  const id = `${settings.seed}\u0001${series.q}\u0001${series.country}\u0001${series.lang}\u0001${settings.resultsPerQuery}\u0001${settings.untitledRate}`;
  let known = days.get(id);
  if (!known) {
    // Day 0 is today's ranking without drift: the results the simulator serves with no day set and drift off.
    const first = rankedList(series, { ...settings, driftEveryMs: 0 });
    known = { checkpoints: [first], last: { day: 0, list: first } };
    if (days.size >= SERIES_LIMIT) days.delete(days.keys().next().value as string);
    days.set(id, known);
  }
  const checkpoint = Math.min(Math.floor(day / STRIDE), known.checkpoints.length - 1);
  let [from, list] = [checkpoint * STRIDE, known.checkpoints[checkpoint] as Result[]];
  if (known.last.day <= day && known.last.day > from) [from, list] = [known.last.day, known.last.list];
  for (let d = from + 1; d <= day; d++) {
    if (movesOn(settings.seed, series, d)) list = moved(list, series, settings, d);
    if (d % STRIDE === 0 && known.checkpoints.length === d / STRIDE) known.checkpoints.push(list);
  }
  known.last = { day, list };
  return list;
}

/** Whether the series' ranking on `day` differs from the day before's (day 0 never moved). */
export function changedOn(series: Series, settings: ResultSettings, day: number): boolean {
  if (day <= 0) return false;
  const [before, after] = [dayList(series, settings, day - 1), dayList(series, settings, day)];
  return before.length !== after.length || before.some((result, i) => result.url !== after[i]?.url);
}

/**
 * The page `query.page` of the series' ranking on `day`, cut exactly from it (no slide: the ground truth is what is
 * served), its items as large as a real engine's.
 */
export function dayPage(query: SearchQuery, settings: ResultSettings, day: number): Record<string, unknown>[] {
  return pageOf(dayList(query, settings, day), query, settings, false).map((item) => fullItem(item, settings.seed));
}

/** The series' ranking on `day` as the ground truth: every result with its rank and domain. */
export function dayRanking(series: Series, settings: ResultSettings, day: number): RankedResult[] {
  return dayList(series, settings, day).map((result, index) => ({ rank: index + 1, url: result.url, domain: hostOf(result.url) }));
}

/** The best rank of `domain` (its host with or without `www.`, any case) on `day`, or null when no result has it. */
export function dayRankOf(series: Series, domain: string, settings: ResultSettings, day: number): number | null {
  const wanted = bare(domain.toLowerCase());
  const list = dayList(series, settings, day);
  for (let i = 0; i < list.length; i++) if (bare(hostOf((list[i] as Result).url)) === wanted) return i + 1;
  return null;
}

/**
 * The day before's list with one to four changes among the first 50 results: a stretch of ten re-ranked, a result
 * drifting 3 to 12 ranks, a domain entering, a result leaving.
 */
function moved(before: readonly Result[], series: Series, settings: ResultSettings, day: number): Result[] {
  const list = [...before];
  const r = (k: number, what: string) => unit(settings.seed, series.q, series.country, series.lang, day, k, what);
  const changes = 1 + Math.floor(r(0, 'changes') * 4);
  const zone = Math.min(list.length, MOVE_ZONE);
  for (let k = 0; k < changes && zone > 1; k++) {
    const kind = r(k, 'kind');
    const at = Math.floor(r(k, 'at') * zone);
    if (kind < 0.2 && zone >= 10) {
      // A stretch of ten results re-ranked: each moves by three or more (the usual shape of an engine's update).
      const from = Math.min(at, zone - 10);
      const block = list.slice(from, from + 10);
      const turn = 3 + Math.floor(r(k, 'turn') * 5);
      list.splice(from, 10, ...block.slice(turn), ...block.slice(0, turn));
    } else if (kind < 0.6) {
      const [result] = list.splice(at, 1);
      const by = (3 + Math.floor(r(k, 'by') * 10)) * (r(k, 'up') < 0.5 ? -1 : 1);
      // Near either end the drift goes the other way: a move day always moves.
      const to = at + by >= 0 && at + by <= list.length ? at + by : at - by;
      list.splice(Math.max(0, Math.min(list.length, to)), 0, result as Result);
    } else if (kind < 0.8) {
      // A new domain enters; the last result falls off the list's end.
      list.splice(at, 0, fresh(series, settings, day, k));
      list.pop();
    } else {
      // A result leaves the ranking; a new one takes the list's last place.
      list.splice(at, 1);
      list.push(fresh(series, settings, day, k));
    }
  }
  return list;
}

/** A result of a domain no ranking of the series had before: new on `day`, its `k`th change. */
function fresh(series: Series, settings: ResultSettings, day: number, k: number): Result {
  const { q, country, lang } = series;
  const tld = country === '' || country === 'us' ? 'com' : country === 'gb' ? 'co.uk' : country;
  const word = pick(FRESH_WORDS, unit(settings.seed, q, country, lang, day, k, 'fresh'));
  const domain = `www.${word}-${hash(settings.seed, q, country, lang, day, k).toString(36)}.${tld}`;
  return build(settings.seed, q, lang, 1_000_000 + day * 10 + k, domain, settings, `day-${country}-${day}`);
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return '';
  }
}

function bare(host: string): string {
  return host.startsWith('www.') ? host.slice(4) : host;
}
