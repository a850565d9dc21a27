/**
 * An allowance's periods (docs/credits.md#periods): a day from midnight to midnight, or a month from the first to the
 * first, in the allowance's time zone, DST included — a day may last 23 or 25 hours, and where a zone's clocks skip
 * midnight (America/Santiago, Asia/Beirut on their spring days) the day begins at the first instant of its date.
 * Pure: an instant in, its period out, by the time zone rules of the runtime's Intl (ICU's tz database).
 */

export type AllowancePer = 'day' | 'month';

/** One period of an allowance. */
export interface Period {
  /** `2026-11-27` (a day) or `2026-11` (a month), as the zone's calendar reads it. */
  key: string;
  /** Its first instant, milliseconds since the epoch. */
  start: number;
  /** The next period's first instant. */
  end: number;
}

const HOUR_MS = 3_600_000;
/** Offsets run from UTC−12 to UTC+14: a local midnight lies within these of the same wall time read as UTC. */
const EARLIEST_OFFSET_MS = -12 * HOUR_MS;
const LATEST_OFFSET_MS = 14 * HOUR_MS;

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The zone's formatter, made once: a hold of credits asks for its period, and Intl's are slow to make. */
function formatter(timeZone: string): Intl.DateTimeFormat {
  let made = formatters.get(timeZone);
  if (!made) {
    made = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, made);
  }
  return made;
}

/** Whether Intl knows the time zone (an IANA name such as `Europe/Berlin`, or `UTC`). */
export function isTimeZone(name: string): boolean {
  try {
    formatter(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * A time zone's name as Intl resolves it, one per zone (`utc` is `UTC`, `Asia/Kolkata` is ICU's `Asia/Calcutta`): to
 * compare zones, never to show one (ICU keeps the old names).
 */
export function canonicalTimeZone(name: string): string {
  return formatter(name).resolvedOptions().timeZone;
}

interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/** The zone's wall time at an instant. */
function wallTime(at: number, timeZone: string): WallTime {
  const parts: Record<string, number> = {};
  for (const part of formatter(timeZone).formatToParts(at)) if (part.type !== 'literal') parts[part.type] = Number(part.value);
  return { year: parts.year as number, month: parts.month as number, day: parts.day as number, hour: parts.hour as number, minute: parts.minute as number, second: parts.second as number };
}

/** The zone's offset from UTC at an instant (to the second: old local mean times had seconds). */
function offsetAt(at: number, timeZone: string): number {
  const wall = wallTime(at, timeZone);
  return Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second) - Math.floor(at / 1000) * 1000;
}

/** A date as one number, for comparing: 20261127. */
const dateNumber = (year: number, month: number, day: number) => year * 10_000 + month * 100 + day;

/**
 * The first instant of a local date in a zone: its midnight, the earliest if the zone's clocks went back across it; or,
 * when its clocks skipped midnight, the instant they jumped (the first that reads that date). `month` may run past 12
 * and `day` past the month's end: they carry over, as Date.UTC's do.
 */
export function startOfDate(year: number, month: number, day: number, timeZone: string): number {
  const base = Date.UTC(year, month - 1, day);
  const date = new Date(base);
  const wanted = dateNumber(date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate());
  // Each offset the zone keeps around that date: midnight is `base` less one of them.
  const offsets = new Set<number>();
  for (let at = base - LATEST_OFFSET_MS - HOUR_MS; at <= base - EARLIEST_OFFSET_MS + HOUR_MS; at += 3 * HOUR_MS) offsets.add(offsetAt(at, timeZone));
  const midnights = [...offsets]
    .map((offset) => base - offset)
    .filter((at) => {
      const wall = wallTime(at, timeZone);
      return dateNumber(wall.year, wall.month, wall.day) === wanted && wall.hour === 0 && wall.minute === 0 && wall.second === 0;
    });
  if (midnights.length > 0) return Math.min(...midnights);
  // No midnight that day: the first second that reads the date, found by halving (the date only moves forward here).
  let low = Math.floor((base - LATEST_OFFSET_MS - HOUR_MS) / 1000);
  let high = Math.ceil((base - EARLIEST_OFFSET_MS + HOUR_MS) / 1000);
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    const wall = wallTime(middle * 1000, timeZone);
    if (dateNumber(wall.year, wall.month, wall.day) >= wanted) high = middle;
    else low = middle + 1;
  }
  return low * 1000;
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** The period of `per` in `timeZone` that the instant `at` (ms since the epoch) lies in. */
export function periodAt(at: number, per: AllowancePer, timeZone: string): Period {
  const wall = wallTime(at, timeZone);
  let period = periodOf(wall.year, wall.month, per === 'day' ? wall.day : 1, per, timeZone);
  // An instant in an hour the clocks went back across midnight reads the date before, yet follows the next date's first
  // instant: periods follow each other without a gap or an overlap, so it belongs to the next.
  while (at >= period.end) {
    const next = new Date(period.end);
    const wallNext = wallTime(next.getTime(), timeZone);
    period = periodOf(wallNext.year, wallNext.month, per === 'day' ? wallNext.day : 1, per, timeZone);
  }
  return period;
}

/** The day or month that begins on the local date given. */
function periodOf(year: number, month: number, day: number, per: AllowancePer, timeZone: string): Period {
  const start = startOfDate(year, month, day, timeZone);
  const end = per === 'day' ? startOfDate(year, month, day + 1, timeZone) : startOfDate(year, month + 1, 1, timeZone);
  const key = per === 'day' ? `${pad(year, 4)}-${pad(month)}-${pad(day)}` : `${pad(year, 4)}-${pad(month)}`;
  return { key, start, end };
}
