import type { Reader } from '../analytics/reader.ts';
import { KEY_SPEND_VIEW } from '../analytics/views.ts';
import { finite, text } from './read-values.ts';
import { reportStatements as sql } from './statements.ts';

/** Days the panel covers: a month's worth, up to the latest day with spend. */
export const SPEND_DAYS = 31;
/** Keys charted: a pool holds at most 64; a tampered view could hold any number. */
const MAX_KEYS = 12;
/** Lines of the pipelines' table. */
const MAX_PIPELINES = 40;

/** One key's credits per day over the panel's days, and its allowance. */
export interface KeySpendSeries {
  /** Its label (the labels pipelines give it, `/` between them), or `(no key recorded)`. */
  label: string;
  credits: number[];
  allowance: { credits: number; per: 'day' | 'month'; timezone: string } | null;
}

/** What the report's panel shows of webdata_spend (docs/credits.md#where-the-credits-went). */
export interface KeySpend {
  /** The days, oldest first (`2026-11-27`): on the clocks of each key's allowance, else UTC. */
  days: string[];
  keys: KeySpendSeries[];
  /** Credits over those days by pipeline and key, most first. */
  pipelines: { pipeline: string; key: string; credits: number }[];
}

/** The `count` calendar days that end on `last` (`2026-11-27`), oldest first; none for a day that is not one. */
export function daysEnding(last: string, count: number): string[] {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(last);
  if (!match) return [];
  const end = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
  if (!Number.isFinite(end)) return [];
  return Array.from({ length: count }, (_, i) => new Date(end - (count - 1 - i) * 86_400_000).toISOString().slice(0, 10));
}

/**
 * Credits per day per key from the state's webdata_spend, over the month up to its latest day; undefined when the
 * database has no such view (no run of a webdata-etl that has it opened the store) or no spend. Every value converted
 * on the way in (data.ts): the file may have been edited by anyone with access to it.
 */
export async function readKeySpend(reader: Reader): Promise<KeySpend | undefined> {
  if (!(await reader.exists(KEY_SPEND_VIEW, 'state'))) return undefined;
  const view = reader.name(KEY_SPEND_VIEW, 'state');
  const [latest] = await reader.all(sql.latestSpendDay(view));
  const days = daysEnding(text(latest?.day), SPEND_DAYS);
  if (days.length === 0) return undefined;
  const index = new Map(days.map((day, i) => [day, i]));
  const keys = new Map<string, { labels: Set<string>; credits: number[]; allowance: KeySpendSeries['allowance'] }>();
  const pipelines = new Map<string, { pipeline: string; key: string; credits: number }>();
  for (const row of await reader.all(sql.keySpendByDay(view, reader.dialect), [days[0]])) {
    const at = index.get(text(row.day));
    const credits = finite(row.credits) ?? 0;
    if (at === undefined) continue;
    const label = text(row.key_label);
    const id = text(row.key_fingerprint) || (label ? `label:${label}` : '');
    let key = keys.get(id);
    if (key === undefined) {
      if (keys.size >= MAX_KEYS) continue;
      key = { labels: new Set(), credits: days.map(() => 0), allowance: allowanceOf(row) };
      keys.set(id, key);
    }
    if (label) key.labels.add(label);
    key.credits[at] = (key.credits[at] ?? 0) + credits;
    const pipeline = text(row.pipeline);
    const byPipeline = pipelines.get(`${pipeline}\u0000${id}\u0000${label}`) ?? { pipeline, key: label || NO_KEY, credits: 0 };
    byPipeline.credits += credits;
    pipelines.set(`${pipeline}\u0000${id}\u0000${label}`, byPipeline);
  }
  if (keys.size === 0) return undefined;
  return {
    days,
    keys: [...keys.values()].map((key) => ({ label: key.labels.size > 0 ? [...key.labels].sort().join('/') : NO_KEY, credits: key.credits, allowance: key.allowance })),
    pipelines: [...pipelines.values()].sort((a, b) => b.credits - a.credits).slice(0, MAX_PIPELINES),
  };
}

const NO_KEY = '(no key recorded)';

function allowanceOf(row: Record<string, unknown>): KeySpendSeries['allowance'] {
  const credits = finite(row.allowance_credits);
  const per = row.allowance_per;
  if (credits === undefined || !(credits > 0) || (per !== 'day' && per !== 'month')) return null;
  return { credits, per, timezone: text(row.allowance_timezone) };
}
