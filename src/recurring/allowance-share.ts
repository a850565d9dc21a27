import { type AllowancePer, type Period, periodAt } from '../schedule/allowance-period.ts';
import type { Occurrences } from './occurrences.ts';

/*
 * An allowance spread over a schedule (docs/credits.md#spreading-an-allowance): a scheduled pipeline whose allowance
 * says `spread: 'even'` spends at most, per key, what is left of the key's period divided by the pipeline's
 * occurrences left in it, this one included. Pure arithmetic over the schedule's occurrences and the allowance's
 * periods: what is left comes from the state store (run/allowance-shares.ts).
 */

/** What a share is taken of: an allowance's credits, period and zone. */
export interface ShareAllowance {
  credits: number;
  per: AllowancePer;
  timezone: string;
}

/**
 * Occurrences counted one by one at most (croner reads one in some 40 µs: 20 000 take under a second); a period with
 * more (a cron of seconds over a month) has the rest reckoned from the pace of those counted.
 */
export const MOST_COUNTED = 20_000;

/** How many occurrences are left in a period. */
export interface OccurrencesLeft {
  /** This one and those due after it, before the period ends. */
  count: number;
  /** False: more than were counted (beyond `enough`, or reckoned from the pace past MOST_COUNTED). */
  exact: boolean;
}

/**
 * The occurrences left in a period at `now` (ms since the epoch), this one included: the run at `now` counts as one,
 * then every occurrence due after `now` and before `end`. Counting stops past `enough` (more occurrences than credits
 * left: each share is 0 credits however many more there are).
 */
export function occurrencesLeft(occurrences: Occurrences, now: number, end: number, enough = Number.POSITIVE_INFINITY): OccurrencesLeft {
  let count = 1;
  let at = now;
  const bound = Math.min(enough, MOST_COUNTED);
  while (count <= bound) {
    const next = occurrences.next(at);
    if (next === null || next >= end) return { count, exact: true };
    count += 1;
    at = next;
  }
  if (count > enough) return { count, exact: false };
  // Past the bound: the rest at the pace of those counted, rounded up (more occurrences, a smaller share, never a larger).
  const pace = (at - now) / (count - 1);
  return { count: Math.max(count, Math.ceil((end - now) / pace)), exact: false };
}

/** An occurrence's share: what is left divided by the occurrences left, this one included, in whole credits. */
export function shareOf(left: number, occurrences: number): number {
  return Math.max(0, Math.floor(left / Math.max(1, occurrences)));
}

/** The latest occurrence at or before `now` in the period (the one a run at `now` belongs to), or none yet in it. */
export function occurrenceAt(occurrences: Occurrences, now: number, period: Period): number | undefined {
  return occurrences.dueBetween(period.start - 1, now, 1).due[0];
}

/** One upcoming occurrence's share, as planned. */
export interface PlannedShare {
  /** The occurrence, ms since the epoch. */
  at: number;
  /** Its period (`2026-11-28`, `2026-11`). */
  period: string;
  /** Credits of the key it may spend, as planned. */
  share: number;
  /** Occurrences in its period, and those left at it (itself included). */
  ofOccurrences: number;
  occurrencesLeft: number;
  exact: boolean;
}

/**
 * The shares of upcoming occurrences as planned: the period's whole allowance spread over its occurrences from its
 * start, each spending its share — what each gets when nothing else spends from the key and none leaves credits over.
 * With A credits over N occurrences, each gets ⌊A/N⌋ and the last A mod N get one more: the share of an occurrence
 * with n left (itself included) is ⌊A/N⌋ + (n ≤ A mod N ? 1 : 0). A run's own share is taken of what is really left.
 * `upcoming`: consecutive occurrences, oldest first (`Occurrences.upcoming`): the count left falls by one from each to
 * the next of a period, so that each period is counted once.
 */
export function plannedShares(allowance: ShareAllowance, occurrences: Occurrences, upcoming: readonly number[]): PlannedShare[] {
  let current: { period: Period; total: OccurrencesLeft; left: OccurrencesLeft } | undefined;
  return upcoming.map((at) => {
    if (current && at < current.period.end) current.left = { ...current.left, count: Math.max(1, current.left.count - 1) };
    else {
      const period = periodAt(at, allowance.per, allowance.timezone);
      const left = occurrencesLeft(occurrences, at, period.end);
      const first = occurrences.next(period.start - 1) ?? at;
      current = { period, left, total: first >= at ? left : occurrencesLeft(occurrences, first, period.end) };
    }
    const { period, total, left } = current;
    const each = Math.floor(allowance.credits / total.count);
    const over = allowance.credits - each * total.count;
    return { at, period: period.key, share: each + (left.count <= over ? 1 : 0), ofOccurrences: total.count, occurrencesLeft: left.count, exact: total.exact && left.exact };
  });
}

/** What of a pipeline's settings decides whether it spreads an allowance, and over what. */
interface SpreadSettings {
  allowance?: { spread?: 'even' | undefined } | undefined;
  keys?: Record<string, { allowance?: { spread?: 'even' | undefined } | undefined }> | undefined;
  schedule?: unknown;
}

/**
 * The fields that spread an allowance in a pipeline with no schedule to spread it over (`allowance.spread`,
 * `keys.<label>.allowance.spread`), each with what would do: a share is counted in the schedule's occurrences, and a
 * pipeline without one has none (docs/credits.md#spreading-an-allowance). `allowance`: the run's, in place of the
 * pipeline's (`run()`'s option).
 */
export function spreadWithoutSchedule(settings: SpreadSettings, allowance = settings.allowance): { path: (string | number)[]; message: string }[] {
  if (settings.schedule !== undefined) return [];
  const spread = [
    ...(allowance?.spread ? [['allowance', 'spread']] : []),
    ...Object.entries(settings.keys ?? {}).flatMap(([label, own]) => (own.allowance?.spread ? [['keys', label, 'allowance', 'spread']] : [])),
  ];
  return spread.map((path) => ({
    path,
    message:
      "\"even\" spreads what is left of the period over the schedule's occurrences, and this pipeline has no schedule: add schedule: { cron: '0 6 * * *', timezone: 'UTC' }, " +
      'or leave spread out (a run may then spend what is left of the period)',
  }));
}
