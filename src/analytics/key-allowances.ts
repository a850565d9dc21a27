import { z } from 'zod';
import { isTimeZone, periodAt } from '../schedule/allowance-period.ts';
import type { Reader } from './reader.ts';
import { keyAllowanceStatements as sql } from './statements.ts';

/** A key's allowance as the state database records it, and where its period stands at an instant. */
export interface KeyAllowanceNow {
  fingerprint: string;
  /** The label the pipeline that recorded it gives the key. */
  label: string;
  pipeline: string;
  credits: number;
  per: 'day' | 'month';
  timezone: string;
  /** The period the instant is in (`2026-11-27`, `2026-11`), and when the next begins (ISO 8601). */
  period: string;
  periodEnds: string;
  /** Credits the ledger holds for the key in the period (every pipeline's), those held by runs at work, and what is left. */
  spent: number;
  held: number;
  left: number;
}

/**
 * A recorded allowance read from a file anyone with access could have edited: kept only as a run could have written
 * it (a zone this runtime knows, a period it has, whole credits), else left out rather than shown wrong.
 */
const recordedSchema = z.object({
  fingerprint: z.string().max(200),
  label: z.string().max(200),
  pipeline: z.string().max(200),
  credits: z.coerce.number().int().positive(),
  per: z.enum(['day', 'month']),
  timezone: z.string().max(100).refine(isTimeZone),
});

const number = (value: unknown): number => {
  const n = Number(value);
  return Number.isFinite(n) ? n : 0;
};

/**
 * Every key's allowance recorded in the state database `reader` reads (docs/credits.md#allowances), or those of
 * `fingerprints`, with what the period `at` is in took and has left: the same sums as a run's hold decides on (the
 * ledger's spend in the period, every holder's standing hold). None when the database has no allowances' table (no
 * run of a webdata-etl that knows allowances opened it).
 */
export async function keyAllowancesAt(reader: Reader, at: number, fingerprints?: readonly string[]): Promise<KeyAllowanceNow[]> {
  if (!(await reader.exists('key_allowances', 'state'))) return [];
  const rows = await reader.all(sql.recorded(reader.name('key_allowances', 'state')));
  const wanted = fingerprints === undefined ? undefined : new Set(fingerprints);
  const found: KeyAllowanceNow[] = [];
  for (const row of rows) {
    const recorded = recordedSchema.safeParse(row);
    if (!recorded.success || (wanted !== undefined && !wanted.has(recorded.data.fingerprint))) continue;
    const allowance = recorded.data;
    const period = periodAt(at, allowance.per, allowance.timezone);
    const [use] = await reader.all(sql.periodUse(reader.name('spend', 'state'), reader.name('key_holds', 'state'), reader.dialect), [
      allowance.fingerprint,
      period.key,
      allowance.fingerprint,
      period.key,
      at,
    ]);
    const spent = number(use?.spent);
    const held = number(use?.held);
    found.push({ ...allowance, period: period.key, periodEnds: new Date(period.end).toISOString(), spent, held, left: Math.max(0, allowance.credits - spent - held) });
  }
  return found;
}
