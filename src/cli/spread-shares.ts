import type { Pipeline } from '../config/define.ts';
import { type PlannedShare, plannedShares } from '../recurring/allowance-share.ts';
import { inZone, occurrencesOf } from '../recurring/occurrences.ts';
import { type Allowance, describeAllowance } from '../schedule/allowance.ts';

/** An allowance a pipeline spreads (`spread: 'even'`): the pipeline's, for each key without its own (`key` null), or a key's own. */
export interface SpreadAllowance {
  key: string | null;
  allowance: Allowance;
}

/** The allowances the pipeline spreads over its schedule (none without a schedule: refused where it is set). */
export function spreadAllowances(pipeline: Pipeline): SpreadAllowance[] {
  if (pipeline.schedule === undefined) return [];
  return [
    ...(pipeline.allowance?.spread ? [{ key: null, allowance: pipeline.allowance }] : []),
    ...Object.entries(pipeline.keys ?? {}).flatMap(([label, own]) => (own.allowance?.spread ? [{ key: label, allowance: own.allowance }] : [])),
  ];
}

/** An occurrence's share of one spread allowance, as planned (recurring/allowance-share.ts). */
export type OccurrenceShare = Omit<PlannedShare, 'at'> & { key: string | null };

/** The planned shares of each upcoming occurrence (consecutive, oldest first), one per allowance the pipeline spreads. */
export function occurrenceShares(pipeline: Pipeline, upcoming: readonly number[]): OccurrenceShare[][] {
  const schedule = pipeline.schedule;
  const spread = spreadAllowances(pipeline);
  if (schedule === undefined || spread.length === 0) return upcoming.map(() => []);
  const occurrences = occurrencesOf(schedule);
  const each = spread.map(({ key, allowance }) => plannedShares(allowance, occurrences, upcoming).map(({ at: _at, ...share }) => ({ key, ...share })));
  return upcoming.map((_, index) => each.map((shares) => shares[index] as OccurrenceShare));
}

/**
 * An occurrence's shares in words: `share: 33 credits a key, 5 for key "main"`; `periods`, each with its period's
 * occurrences: `33 credits a key (2026-11: 30 occurrences)`.
 */
export function sharesText(shares: readonly OccurrenceShare[], periods = false): string {
  if (shares.length === 0) return '';
  const words = shares.map((share) => {
    const credits = `${share.exact ? '' : 'about '}${share.share} credit${share.share === 1 ? '' : 's'}`;
    const of = periods ? ` (${share.period}: ${share.exact ? '' : 'about '}${share.ofOccurrences} occurrence${share.ofOccurrences === 1 ? '' : 's'})` : '';
    return `${credits} ${share.key === null ? 'a key' : `for key "${share.key}"`}${of}`;
  });
  return `share: ${words.join(', ')}`;
}

/** What each spread allowance is, as `schedules` says it once per pipeline. */
export function spreadLines(pipeline: Pipeline): string[] {
  return spreadAllowances(pipeline).map(
    ({ key, allowance }) => `  ${key === null ? 'allowance' : `key "${key}"`}: ${describeAllowance(allowance)}, spread evenly: each occurrence's share below, as planned`,
  );
}

/** `estimate`'s part: the next occurrence's planned share of each spread allowance. */
export interface EstimateShare {
  next: { at: string; local: string } | null;
  shares: OccurrenceShare[];
}

/** The next occurrence after `now` and its planned shares; undefined when the pipeline spreads nothing. */
export function estimateShares(pipeline: Pipeline, now: number): EstimateShare | undefined {
  const schedule = pipeline.schedule;
  if (schedule === undefined || spreadAllowances(pipeline).length === 0) return undefined;
  const next = occurrencesOf(schedule).next(now);
  if (next === null) return { next: null, shares: [] };
  return { next: { at: new Date(next).toISOString(), local: inZone(next, schedule.timezone) }, shares: occurrenceShares(pipeline, [next])[0] ?? [] };
}

/** `estimate`'s line: `share of the next occurrence (2026-11-28 06:00:00 +01:00, as planned): 33 credits a key (2026-11: 30 occurrences)`. */
export function estimateShareLine(estimated: EstimateShare): string {
  if (estimated.next === null) return 'share of the next occurrence: none (the schedule has no occurrence to come)';
  return `share of the next occurrence (${estimated.next.local}, as planned): ${sharesText(estimated.shares, true).replace(/^share: /, '')}`;
}
