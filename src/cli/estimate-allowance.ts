import { existsSync } from 'node:fs';
import { type KeyAllowanceNow, keyAllowancesAt, keySecretOf, periodUse, type PeriodUse } from '../analytics/key-allowances.ts';
import { isPostgresDatabase, openReader, type Reader } from '../analytics/reader.ts';
import { keyFingerprint, readApiKeys } from '../client/api-keys.ts';
import type { Pipeline } from '../config/define.ts';
import type { PostgresTarget } from '../postgres/target.ts';
import { type Allowance, describeAllowance, sameAllowance } from '../schedule/allowance.ts';

type KeyAllowance = Pick<Allowance, 'credits' | 'per' | 'timezone'>;

/** One key's allowance as `estimate` finds it: the pipeline's or the state database's, and its period now. */
export interface KeyAllowanceEstimate {
  label: string;
  /** null: the key has none (its credits are not bounded by an allowance). */
  allowance: KeyAllowance | null;
  /** Who says so: the pipeline's file, or the state database (another pipeline, or an earlier run, recorded it). */
  from: 'pipeline' | 'state' | null;
  /** What its period took and has left; null: the key is not known to the database (`unknown` says why). */
  use: PeriodUse | null;
  unknown?: 'no key in the environment' | 'no run has recorded this key yet';
  /** Another pipeline recorded another allowance for this key: a run of this pipeline would be refused (exit 2). */
  conflict?: { pipeline: string; allowance: KeyAllowance };
}

/** The allowance's part of an estimate: each key's, and how much of what is left the worst case would take. */
export interface AllowanceEstimate {
  keys: KeyAllowanceEstimate[];
  /** The worst case's credits, and what the keys' allowances have left in their periods (null: a key has none). */
  worstCase: number;
  left: number | null;
  /** The worst case as a share of what is left (1: all of it); null: unbounded, or nothing is left. */
  share: number | null;
  fits: boolean;
}

/**
 * How much of the keys' allowances in their current periods a run's worst case would take (docs/credits.md#allowances):
 * each key of the environment (`WEBDATA_API_KEYS`, its _FILE, `WEBDATA_API_KEY`; `default` without one) with the
 * allowance the pipeline declares for it (`keys.<label>.allowance`, else `allowance`) or the state database records by
 * its fingerprint, and what its period has left: read from the state database (never written; a file not there yet
 * is a store with nothing recorded). Undefined when no key has an allowance.
 */
export async function estimateAllowance(
  pipeline: Pipeline,
  worstCase: number,
  env: Readonly<Record<string, string | undefined>>,
  state: string | PostgresTarget,
  now: number,
  warn: (message: string) => void,
): Promise<AllowanceEstimate | undefined> {
  const keys = readApiKeys(env)?.keys ?? [];
  const declared = (label: string): KeyAllowance | null => pipeline.keys?.[label]?.allowance ?? pipeline.allowance ?? null;
  const labels = keys.length > 0 ? keys.map((key) => key.label) : ['default'];
  // The state database is read only when there are keys to know it by (a key's fingerprint): a file not made yet is a
  // store with nothing recorded; one that cannot be read leaves what is left unknown, which is no reason to fail.
  let reader: Reader | undefined;
  let known: { fingerprints: Map<string, string>; recorded: KeyAllowanceNow[] } = { fingerprints: new Map(), recorded: [] };
  try {
    if (keys.length > 0 && (typeof state !== 'string' || isPostgresDatabase(state) || existsSync(state))) {
      reader = await openReader(state, { stateSchema: pipeline.state.schema });
      const secret = await keySecretOf(reader);
      const fingerprints = new Map(secret ? keys.map((key) => [key.label, keyFingerprint(key.key, secret)]) : []);
      known = { fingerprints, recorded: secret ? await keyAllowancesAt(reader, now, [...fingerprints.values()]) : [] };
    }
    const found = await Promise.all(
      labels.map((label) => {
        const fingerprint = known.fingerprints.get(label);
        const recorded = known.recorded.find((each) => each.fingerprint === fingerprint);
        return keyEstimate({ label, pipeline: pipeline.name, declared: declared(label), fingerprint, recorded, reader, now, keyless: keys.length === 0 });
      }),
    );
    if (found.every((key) => key.allowance === null)) return undefined;
    const bounded = found.every((key) => key.allowance !== null);
    const left = bounded ? found.reduce((sum, key) => sum + (key.use?.left ?? (key.allowance as KeyAllowance).credits), 0) : null;
    return { keys: found, worstCase, left, share: left === null || left === 0 ? null : Math.round((worstCase / left) * 10_000) / 10_000, fits: left === null || worstCase <= left };
  } catch (error) {
    warn(`the keys' allowances were not read from the state database (${error instanceof Error ? error.message : String(error)}): the estimate says nothing of them`);
    return undefined;
  } finally {
    await reader?.close().catch(() => undefined);
  }
}

/** One key's allowance: the pipeline's declaration against what the state database recorded, and its period's use. */
async function keyEstimate(key: {
  label: string;
  pipeline: string;
  declared: KeyAllowance | null;
  fingerprint: string | undefined;
  recorded: KeyAllowanceNow | undefined;
  reader: Reader | undefined;
  now: number;
  /** No key in the environment: none to know the database's record by. */
  keyless: boolean;
}): Promise<KeyAllowanceEstimate> {
  const { label, pipeline, declared, fingerprint, recorded, reader, now } = key;
  // As the run decides (state/allowance-store.ts): another pipeline's record that differs is a conflict; the recording
  // pipeline's own declaration replaces its record; a pipeline that declares none is bound by the record.
  if (recorded && declared && !sameAllowance(recorded, declared) && recorded.pipeline !== pipeline) {
    return { label, allowance: declared, from: 'pipeline', use: null, conflict: { pipeline: recorded.pipeline, allowance: pick(recorded) } };
  }
  if (recorded && (declared === null || sameAllowance(recorded, declared))) return { label, allowance: pick(recorded), from: 'state', use: pick(recorded, true) };
  if (declared === null) return { label, allowance: null, from: null, use: null };
  if (reader && fingerprint) return { label, allowance: declared, from: 'pipeline', use: await periodUse(reader, fingerprint, declared, now) };
  return { label, allowance: declared, from: 'pipeline', use: null, unknown: key.keyless ? 'no key in the environment' : 'no run has recorded this key yet' };
}

function pick(recorded: KeyAllowance & PeriodUse, use?: false): KeyAllowance;
function pick(recorded: KeyAllowance & PeriodUse, use: true): PeriodUse;
function pick(recorded: KeyAllowance & PeriodUse, use = false): KeyAllowance | PeriodUse {
  return use
    ? { period: recorded.period, periodEnds: recorded.periodEnds, spent: recorded.spent, held: recorded.held, left: recorded.left }
    : { credits: recorded.credits, per: recorded.per, timezone: recorded.timezone };
}

/** The allowance's lines of `estimate`. */
export function allowanceLines(estimate: AllowanceEstimate): string[] {
  const worst = `the worst case (${estimate.worstCase} credits)`;
  const stops = 'it does not fit: the run will stop at the allowance (status allowance) and go on when the period opens again';
  const take =
    estimate.left === null
      ? `allowance: a key has none, so ${worst} is not bounded by the allowances`
      : estimate.left === 0
        ? `allowance: nothing is left this period of the keys' allowances (${stops})`
        : `allowance: ${worst} takes ${Math.round((estimate.share ?? 0) * 1000) / 10}% of the ${estimate.left} credits left this period (${estimate.fits ? 'it fits' : stops})`;
  return [take, ...estimate.keys.map(keyLine)];
}

function keyLine(key: KeyAllowanceEstimate): string {
  if (key.conflict) {
    return `  ${key.label}: this pipeline declares ${describeAllowance(key.allowance as KeyAllowance)}, but pipeline "${key.conflict.pipeline}" recorded ${describeAllowance(key.conflict.allowance)}: a run would be refused (exit 2)`;
  }
  if (key.allowance === null) return `  ${key.label}: no allowance`;
  const source = key.from === 'state' ? 'recorded in the state database' : 'declared by this pipeline';
  if (key.use === null) return `  ${key.label}: ${describeAllowance(key.allowance)}, ${source}; what is left of it unknown (${key.unknown})`;
  const ends = key.use.periodEnds.replace('T', ' ').slice(0, 16);
  return `  ${key.label}: ${describeAllowance(key.allowance)}, ${source}: ${key.use.spent} spent, ${key.use.held} held, ${key.use.left} left in ${key.use.period} (until ${ends} UTC)`;
}
