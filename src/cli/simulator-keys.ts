import { KEY_LABEL, MAX_KEYS } from '../client/api-keys.ts';
import { UsageError } from '../errors/usage-error.ts';

/** One simulated key of a pool as the command line gives it: a label (as WEBDATA_API_KEYS labels keys) and its plan. */
export interface SimulatorKeyPlan {
  readonly label: string;
  readonly ratePerSecond: number;
  readonly burst: number;
  readonly credits: number;
  /** Revoked (401) once it has been admitted this many requests; undefined: never. */
  readonly revokeAfter: number | undefined;
}

/** What an entry leaves out. */
export interface SimulatorKeyDefaults {
  readonly burst: number;
  readonly credits: number;
}

/** The syntax, as every message says it. */
export const SIMULATOR_KEYS_SYNTAX = 'label:rate[/burst[/credits]][@revoke-after], comma-separated';

const ENTRY = /^([^:]*):([^/@]*)(?:\/([^/@]*))?(?:\/([^/@]*))?(?:@(.*))?$/;
/** Beyond these the flag is a typo, not a plan: a simulator key past 10 000 r/s is no limit at all. */
const MAX_RATE = 10_000;
const MAX_COUNT = 1_000_000_000;

/**
 * The keys of `--keys` / `--simulator-keys` / WEBDATA_SIMULATOR_KEYS (docs/cli.md#a-pool-of-keys-offline): `main:8,second:4/2,
 * spare:2/2/500@40` — each a label, its requests per second, then optionally its burst, its credits, and after `@`
 * the number of requests after which it is revoked. Every problem at once, each naming `source` and the entry.
 */
export function parseSimulatorKeys(source: string, text: string, defaults: SimulatorKeyDefaults): SimulatorKeyPlan[] {
  const entries = text.split(',').map((entry) => entry.trim());
  const problems: string[] = [];
  if (entries.every((entry) => entry === '')) problems.push(`gives no key: give ${SIMULATOR_KEYS_SYNTAX}, e.g. main:8,second:4/2`);
  else if (entries.length > MAX_KEYS) problems.push(`gives ${entries.length} keys; the most is ${MAX_KEYS}`);
  const plans: SimulatorKeyPlan[] = [];
  const labels = new Set<string>();
  entries.slice(0, MAX_KEYS).forEach((entry, index) => {
    // An entry is said by its place and its label, never echoed: a real key pasted here by mistake stays unshown.
    const parts = ENTRY.exec(entry);
    const label = parts?.[1] ?? '';
    const said = (message: string) => problems.push(`entry ${index + 1}${KEY_LABEL.test(label) ? ` (${label})` : ''}: ${message}`);
    if (!parts) return said(`is not ${SIMULATOR_KEYS_SYNTAX.replace(', comma-separated', '')}, e.g. second:4/2/500`);
    const [, , rate = '', burst, credits, revokeAfter] = parts;
    const found: string[] = [];
    if (!KEY_LABEL.test(label)) found.push('its label is not 1 to 32 of a-z, 0-9, _ and - (lower case)');
    else if (labels.has(label)) found.push(`the label "${label}" is given twice: give each key a label of its own`);
    labels.add(label);
    const ratePerSecond = number(rate, { above: 0, max: MAX_RATE });
    if (ratePerSecond === undefined) found.push(`the rate must be requests per second, above 0 and at most ${MAX_RATE}`);
    const burstOf = burst === undefined || burst === '' ? defaults.burst : number(burst, { min: 1, max: MAX_COUNT, whole: true });
    if (burstOf === undefined) found.push(`the burst must be a whole number of requests, at least 1`);
    const creditsOf = credits === undefined || credits === '' ? defaults.credits : number(credits, { min: 0, max: MAX_COUNT, whole: true });
    if (creditsOf === undefined) found.push(`the credits must be a whole number, 0 or more`);
    const revokeOf = revokeAfter === undefined ? undefined : number(revokeAfter, { min: 0, max: MAX_COUNT, whole: true });
    if (revokeAfter !== undefined && revokeOf === undefined) found.push('what follows @ must be a whole number of requests (0 or more) after which the key is revoked');
    if (found.length > 0) return said(found.join('; '));
    plans.push({ label, ratePerSecond: ratePerSecond as number, burst: burstOf as number, credits: creditsOf as number, revokeAfter: revokeOf });
  });
  if (problems.length > 0) throw new UsageError(`${source}: ${problems.join('; ')} (each entry ${SIMULATOR_KEYS_SYNTAX.replace(', comma-separated', '')})`);
  return plans;
}

/** A decimal number within bounds, or undefined (`Number('')` is 0, `Number('0x10')` 16: neither is taken). */
function number(text: string, bounds: { above?: number; min?: number; max: number; whole?: boolean }): number | undefined {
  if (!/^\d+(\.\d+)?$/.test(text.trim())) return undefined;
  const value = Number(text);
  if (bounds.above !== undefined && !(value > bounds.above)) return undefined;
  if (bounds.min !== undefined && value < bounds.min) return undefined;
  if (value > bounds.max || (bounds.whole && !Number.isInteger(value))) return undefined;
  return value;
}
