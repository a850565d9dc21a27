import { Cron } from 'croner';
import type { Schedule } from './schedule-config.ts';

/**
 * When a schedule's runs are due (docs/schedules.md): its occurrences, each an instant computed from the pattern in
 * its time zone. An occurrence is known by that instant, never by when a worker noticed it, so that every worker of a
 * fleet names it alike whatever its clock's skew (the claim's key: docs/design.md#schedules).
 */
export interface Occurrences {
  /** The first occurrence strictly after `after` (milliseconds since the epoch); null when the pattern has no more. */
  next(after: number): number | null;
  /** The next `count` occurrences strictly after `after`. */
  upcoming(count: number, after: number): number[];
  /**
   * The occurrences in (`after`, `now`], oldest first, at most `limit` of them: the latest ones when there are more
   * (`more` then says so), so that a worker down for a year on a cron of seconds reads a bounded list.
   */
  dueBetween(after: number, now: number, limit: number): { due: number[]; more: boolean };
}

/**
 * The schedule's occurrences, read by croner in the schedule's time zone. Across a change of daylight saving time,
 * croner runs a fixed-time pattern (`30 2 * * *`) once: in a gap at the first valid time after it, in a repeated hour
 * at its first pass; an interval pattern (`*\/30 * * * *`) skips the times in a gap and runs in both passes.
 */
export function occurrencesOf(schedule: Pick<Schedule, 'cron' | 'timezone'>): Occurrences {
  const cron = new Cron(schedule.cron, { paused: true, timezone: schedule.timezone });
  return {
    next(after) {
      return cron.nextRun(new Date(after))?.getTime() ?? null;
    },
    upcoming(count, after) {
      return cron.nextRuns(count, new Date(after)).map((date) => date.getTime());
    },
    dueBetween(after, now, limit) {
      // previousRuns counts back from strictly before its reference: one millisecond on, an occurrence at `now` is in.
      const latest = cron.previousRuns(limit + 1, new Date(now + 1)).map((date) => date.getTime());
      const due = latest.filter((at) => at > after).reverse();
      return due.length > limit ? { due: due.slice(1), more: true } : { due, more: false };
    },
  };
}

/** An instant as the schedule's readers see it: local time in the zone with its offset, `2026-11-27 06:00:00 +01:00`. */
export function inZone(at: number, timezone: string): string {
  const parts = new Intl.DateTimeFormat('en-CA', {
    timeZone: timezone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
    timeZoneName: 'longOffset',
  }).formatToParts(new Date(at));
  const part = (type: Intl.DateTimeFormatPartTypes) => parts.find((p) => p.type === type)?.value ?? '';
  // "GMT+01:00", or "GMT" alone at UTC.
  const offset = part('timeZoneName').replace(/^GMT/, '') || '+00:00';
  return `${part('year')}-${part('month')}-${part('day')} ${part('hour')}:${part('minute')}:${part('second')} ${offset}`;
}
