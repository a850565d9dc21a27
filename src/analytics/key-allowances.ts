import { z } from 'zod';
import { isTimeZone, periodAt } from '../schedule/allowance-period.ts';
import { POSTGRES } from './dialect.ts';
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

/** What a key's period took and has left at an instant, under an allowance (recorded, or a pipeline's declared). */
export type PeriodUse = Pick<KeyAllowanceNow, 'period' | 'periodEnds' | 'spent' | 'held' | 'left'>;

/**
 * What the period of `allowance` that `at` is in took of a key (`fingerprint`) and has left: the same sums as a run's
 * hold decides on (the ledger's spend in the period, every pipeline's, and every holder's standing hold).
 */
export async function periodUse(reader: Reader, fingerprint: string, allowance: Pick<KeyAllowanceNow, 'credits' | 'per' | 'timezone'>, at: number): Promise<PeriodUse> {
  const period = periodAt(at, allowance.per, allowance.timezone);
  const [use] = (await reader.exists('key_holds', 'state'))
    ? await reader.all(sql.periodUse(reader.name('spend', 'state'), reader.name('key_holds', 'state'), reader.dialect), [fingerprint, period.key, fingerprint, period.key, at])
    : [];
  const spent = number(use?.spent);
  const held = number(use?.held);
  return { period: period.key, periodEnds: new Date(period.end).toISOString(), spent, held, left: Math.max(0, allowance.credits - spent - held) };
}

/**
 * Every key's allowance recorded in the state database `reader` reads (docs/credits.md#allowances), or those of
 * `fingerprints`, with what the period `at` is in took and has left (`periodUse`). None when the database has no
 * allowances' table (no run of a webdata-etl that knows allowances opened it).
 */
export async function keyAllowancesAt(reader: Reader, at: number, fingerprints?: readonly string[]): Promise<KeyAllowanceNow[]> {
  if (!(await reader.exists('key_allowances', 'state'))) return [];
  const rows = await reader.all(sql.recorded(reader.name('key_allowances', 'state')));
  const wanted = fingerprints === undefined ? undefined : new Set(fingerprints);
  const found: KeyAllowanceNow[] = [];
  for (const row of rows) {
    const recorded = recordedSchema.safeParse(row);
    if (!recorded.success || (wanted !== undefined && !wanted.has(recorded.data.fingerprint))) continue;
    found.push({ ...recorded.data, ...(await periodUse(reader, recorded.data.fingerprint, recorded.data, at)) });
  }
  return found;
}

/**
 * The secret the state database takes keys' fingerprints under (`webdata_meta` in SQLite, `meta` in PostgreSQL's state
 * schema), to know the environment's keys by them as a run would; undefined when no run has made one yet.
 */
export async function keySecretOf(reader: Reader): Promise<Uint8Array | undefined> {
  const meta = reader.dialect === POSTGRES ? 'meta' : 'webdata_meta';
  if (!(await reader.exists(meta, 'state'))) return undefined;
  const [row] = await reader.all(sql.keySecret(reader.name(meta, 'state')));
  return typeof row?.value === 'string' && row.value !== '' ? Buffer.from(row.value, 'base64url') : undefined;
}
