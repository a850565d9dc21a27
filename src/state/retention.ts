import { z } from 'zod';

/**
 * How long a pipeline's records are kept in its state store (docs/pipelines.md#retention, docs/design.md#retention):
 * its last `runs` runs' records, and the spend ledger for `spend`. Nothing is removed until `webdata-etl prune --yes`
 * is run; without `retention`, everything is kept, as before.
 */
export const SPEND_FLOOR_DAYS = 400;

/** `400d`: a number of whole days; `forever`: never removed. */
const SPEND_RETENTION = /^([1-9][0-9]{0,5})d$/;
const SPEND_FORMAT = 'must be a number of days such as "400d", or "forever"';
const JOURNAL_FORMAT = 'must be "until-complete": a pruned run\'s journal entries go once a later run of the pipeline ended cleanly (every sink holds them)';

export const retentionSchema = z.strictObject({
  /**
   * How many of the pipeline's runs keep their records (the runs row, its series and their stage state, its journal
   * entries, where its sinks began, its sightings, its delivered notifications and its settled occurrences): the last
   * `runs` runs, in the order they were recorded. A run that may still resume, and the latest run, are always kept.
   * Absent: every run's records are kept.
   */
  runs: z.int({ error: 'must be a whole number of runs, 1 or more' }).positive({ error: 'must be a whole number of runs, 1 or more' }).optional(),
  /**
   * When a pruned run's journal entries go: `"until-complete"`, the only way (and so the default), once a later run of
   * the pipeline ended cleanly (completed, out of budget, or with failed series), having replayed to each of its
   * sinks every entry they lacked (docs/design.md#retention); never before, whatever `runs` says. Named so that the
   * issue's `{ runs: 90, journal: 'until-complete' }` reads as what it does.
   */
  journal: z.literal('until-complete', { error: JOURNAL_FORMAT }).optional(),
  /**
   * How long the spend ledger's rows are kept, by the time they were written: a number of days (`"400d"`), or
   * `"forever"` (the default). At least `400d` when the pipeline declares an allowance (a year of a key's spend,
   * a month's period and its time zone with room to spare).
   */
  spend: z
    .string({ error: SPEND_FORMAT })
    .refine((spend) => spend === 'forever' || SPEND_RETENTION.test(spend), { error: SPEND_FORMAT })
    .optional(),
});

export type RetentionInput = z.input<typeof retentionSchema>;
export type Retention = z.output<typeof retentionSchema>;

/** The days a `spend` retention keeps, or null: forever (`undefined` is forever too). */
export function spendDays(spend: string | undefined): number | null {
  if (spend === undefined || spend === 'forever') return null;
  const match = SPEND_RETENTION.exec(spend);
  if (!match) throw new Error(`not a spend retention: ${spend}`);
  return Number(match[1]);
}

/** Why `days` of spend are too few when a key's allowance is counted from the ledger; undefined when they are enough. */
export function tooShortForAllowance(days: number | null): string | undefined {
  if (days === null || days >= SPEND_FLOOR_DAYS) return undefined;
  return `must be at least "${SPEND_FLOOR_DAYS}d" (or "forever") while an allowance is declared: a key's allowance and \`spend\` read a year of its ledger (got "${days}d")`;
}

/** A pipeline's retention problems its other settings make (an allowance in it), each with its field. */
export function retentionProblems(settings: {
  retention?: Retention | undefined;
  allowance?: unknown;
  keys?: Record<string, { allowance?: unknown }> | undefined;
}): { path: string[]; message: string }[] {
  const spend = settings.retention?.spend;
  if (spend === undefined) return [];
  const declared = settings.allowance !== undefined || Object.values(settings.keys ?? {}).some((key) => key.allowance !== undefined);
  const why = declared ? tooShortForAllowance(spendDays(spend)) : undefined;
  return why === undefined ? [] : [{ path: ['retention', 'spend'], message: why }];
}
