import { z } from 'zod';
import { canonicalTimeZone, isTimeZone } from './allowance-period.ts';

/**
 * An allowance (docs/credits.md#allowances): the credits a key may spend a day or a month, in a time zone, whatever the
 * pipelines and runs that send with it. In one shape from a pipeline file (`allowance`, `keys.<label>.allowance`), a
 * JSON config and `run()`'s options to the state store, where it is recorded by the key's fingerprint.
 */
export const allowanceSchema = z.strictObject({
  /** Credits a period, a whole number greater than 0. */
  credits: z.int({ error: 'must be a whole number of credits greater than 0' }).positive({ error: 'must be a whole number of credits greater than 0' }),
  /** A period: from midnight to midnight, or from the first of a month to the next, in `timezone`. */
  per: z.enum(['day', 'month'], { error: 'must be "day" or "month"' }),
  /** An IANA time zone, such as `Europe/Berlin`. @default 'UTC' */
  timezone: z
    .string({ error: 'must be an IANA time zone name, such as "Europe/Berlin", "America/New_York" or "UTC"' })
    .refine(isTimeZone, { error: 'is not a time zone this runtime knows: give an IANA name, such as "Europe/Berlin", "America/New_York" or "UTC"' })
    .default('UTC'),
  /**
   * `even`: a scheduled pipeline spends at most what is left of the period divided by the occurrences left in it
   * (docs/credits.md#spreading-an-allowance).
   */
  spread: z.literal('even', { error: 'must be "even" (what is left divided by the occurrences left in the period), or left out' }).optional(),
});

export type AllowanceInput = z.input<typeof allowanceSchema>;
export type Allowance = z.output<typeof allowanceSchema>;

/** What an allowance is, as messages say it: `30 credits a day (Europe/Berlin)`. */
export function describeAllowance(allowance: Pick<Allowance, 'credits' | 'per' | 'timezone'>): string {
  return `${allowance.credits} credit${allowance.credits === 1 ? '' : 's'} a ${allowance.per} (${allowance.timezone})`;
}

/**
 * Whether two allowances bind a key alike (how a pipeline spreads its share is its own). One zone under two names is one
 * zone: `UTC` and `utc`, `Asia/Kolkata` and `Asia/Calcutta` (each kept as its pipeline wrote it).
 */
export function sameAllowance(a: Pick<Allowance, 'credits' | 'per' | 'timezone'>, b: Pick<Allowance, 'credits' | 'per' | 'timezone'>): boolean {
  return a.credits === b.credits && a.per === b.per && (a.timezone === b.timezone || sameZone(a.timezone, b.timezone));
}

function sameZone(a: string, b: string): boolean {
  try {
    return canonicalTimeZone(a) === canonicalTimeZone(b);
  } catch {
    // A zone this runtime no longer knows (a row another version wrote): as written, or not the same.
    return false;
  }
}
