import type { KeySummary } from '../run/summary.ts';

/** Paints text for a terminal (or not): progress.ts's. */
type Paint = (code: number, text: string) => string;

/** Keys said in a line of their own each beyond this many: a summary is read at a glance. */
const KEYS_PER_LINE = 4;

/**
 * A pool's keys at the end of a run, in one or two lines (`keys: fast 40 req, 2×429, 40 credits, 8 r/s (learned 8.2
 * r/s); slow …`), and a line for each retired key, loud: it needs a person (docs/pipelines.md#a-pool-of-keys).
 */
export function keyLines(keys: readonly KeySummary[] | undefined, paint: Paint): string[] {
  if (!keys || keys.length === 0) return [];
  // A key out of its allowance is said apart, quietly: it serves again in its next period, no one need act.
  const out = (key: KeySummary) => key.retired?.reason === 'allowance';
  const said = keys.map((key) => `${key.label} ${keyFigures(key)}${key.retired ? ` ${out(key) ? paint(33, 'ALLOWANCE SPENT') : paint(31, 'RETIRED')}` : ''}`);
  const lines: string[] = [];
  for (let i = 0; i < said.length; i += KEYS_PER_LINE) lines.push(`${i === 0 ? 'keys' : '     '}: ${said.slice(i, i + KEYS_PER_LINE).join('; ')}\n`);
  for (const key of keys) {
    if (key.retired) lines.push(`${out(key) ? paint(33, `key ${key.label} out of its allowance`) : paint(31, `key ${key.label} retired`)} ${retiredText(key.retired)}\n`);
  }
  return lines;
}

/** `40 req, 2×429, 40 credits, 8 r/s (learned 8.2 r/s)`; `unpaced` for a key without a rate. */
export function keyFigures(key: KeySummary): string {
  return [
    `${key.requests} req`,
    ...(key.rateLimited ? [`${key.rateLimited}×429`] : []),
    `${key.credits} credits`,
    `${key.rate === null ? 'unpaced' : `${key.rate} r/s`}${key.learnedLimit === null ? '' : ` (learned ${key.learnedLimit} r/s)`}`,
  ].join(', ');
}

/** `at 2026-11-27 14:03:05 for /search (payment_required: …)`: when, for what, and why. */
export function retiredText(retired: NonNullable<KeySummary['retired']>): string {
  return `at ${retired.at.replace('T', ' ').slice(0, 19)}${retired.path === null ? '' : ` for ${retired.path}`} (${retired.reason}: ${retired.message})`;
}

/** A pool's keys in a table's cell: `keys: fast 40 req, slow retired (unauthorized)`. */
export function keysNote(keys: readonly KeySummary[] | undefined): string {
  if (!keys || keys.length === 0) return '';
  return `keys: ${keys.map((key) => `${key.label} ${key.requests} req${key.rateLimited ? ` ${key.rateLimited}×429` : ''}${key.retired ? ` retired (${key.retired.reason})` : ''}`).join(', ')}`;
}
