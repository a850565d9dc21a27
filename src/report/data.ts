import { z } from 'zod';
import { filterClause } from '../analytics/filter.ts';
import type { Reader } from '../analytics/reader.ts';
import { OVERLAP_TOP } from '../analytics/statements.ts';
import { SKIPPED } from '../sinks/series-outcomes.ts';
import { viewName } from '../analytics/views.ts';
import { outcomesTable } from '../sinks/series-outcomes.ts';
import { reportStatements as sql } from './statements.ts';
import { urlLabel } from './url-label.ts';
import type { KeySummary } from '../run/summary.ts';
import { storedKeys } from '../run/summary-keys.ts';
import { type KeySpend, readKeySpend } from './key-spend.ts';
import { readTracked, type TrackedLine } from './tracked.ts';
// What is read is converted on the way in (read-values.ts): the database is a file like any other.
import { finite, text } from './read-values.ts';

export { finite, text };

/** Summaries bigger than this are not read (a real one is a few KB). */
const MAX_SUMMARY = 1_000_000;

/** What the report reads of a run's stored summary: each field kept only if it has its type, dropped otherwise. */
const storedSummarySchema = z
  .object({
    reason: z.string().optional().catch(undefined),
    durationMs: z.number().optional().catch(undefined),
    requests: z.object({ total: z.number().optional().catch(undefined) }).optional().catch(undefined),
    items: z.object({ written: z.number().optional().catch(undefined) }).optional().catch(undefined),
    /** A pool's keys: read key by key (reportKeys). */
    keys: z.unknown().optional(),
  })
  .catch({});

function storedSummary(json: unknown): z.infer<typeof storedSummarySchema> {
  if (typeof json !== 'string') return {};
  try {
    return storedSummarySchema.parse(JSON.parse(json));
  } catch {
    return {};
  }
}

/** The most keys a panel lists: a pool holds at most 64; a tampered summary could hold any number. */
const MAX_KEYS = 64;

/** A stored summary's keys as the report shows them: each read as a key (or left out), its strings clipped. */
function reportKeys(stored: unknown): KeySummary[] | undefined {
  const keys = storedKeys(stored)?.slice(0, MAX_KEYS);
  return keys?.map((key) => ({
    ...key,
    label: text(key.label),
    retired: key.retired ? { reason: text(key.retired.reason), message: text(key.retired.message), at: text(key.retired.at), path: key.retired.path === null ? null : text(key.retired.path) } : null,
  }));
}

export interface ReportFilter {
  table: string;
  query?: string | undefined;
  country?: string | undefined;
  /** Queries with rank histories and heatmaps (default: the ones with the most rows). */
  maxQueries: number;
  /** Results followed per history chart. */
  maxLines: number;
  /** Runs shown in the per-run charts (the latest ones). */
  maxRuns: number;
}

export interface RunRow {
  runId: string;
  pipeline: string;
  status: string;
  reason: string | undefined;
  startedAt: string;
  durationMs: number | undefined;
  requests: number | undefined;
  credits: number;
  uncertain: number;
  rows: number | undefined;
  /** A pool's keys (none: one key, or a summary from before pools). */
  keys: KeySummary[] | undefined;
}

export interface ReportData {
  database: string;
  runs: RunRow[];
  rowCount: number;
  rankBuckets: { label: string; value: number }[];
  domains: { label: string; value: number; note: string }[];
  histories: {
    query: string;
    country: string;
    lang: string;
    runs: string[];
    /**
     * Per run: why the series did not complete in it (failed, budget, stopped, not_reached…), or null. Such a run
     * shows no ranks, and is marked: its results were not checked, which is not their being gone.
     */
    incomplete: (string | null)[];
    /** Per run: whether its refresh plan skipped the series (not fetched; no ranks, and not a failure). */
    skipped: boolean[];
    series: { label: string; ranks: (number | null)[] }[];
  }[];
  overlaps: { query: string; lang: string; countries: string[]; pairs: Map<string, number> }[];
  /** Tracked domains in each series' latest run (none: the table tracks no domains). */
  tracked: TrackedLine[];
  /** Credits per day per key, from the state's webdata_spend (none: no such view, or no spend). */
  keySpend?: KeySpend | undefined;
}

/** Rank bands of the distribution chart. */
export const RANK_BANDS: readonly [string, number, number][] = [
  ['1–3', 1, 3],
  ['4–10', 4, 10],
  ['11–20', 11, 20],
  ['21–30', 21, 30],
  ['31–50', 31, 50],
  ['51+', 51, Number.MAX_SAFE_INTEGER],
];

/** The first column of the first row, or undefined. */
const first = (rows: Record<string, unknown>[]): unknown => Object.values(rows[0] ?? {})[0];

/** Everything the report shows, read from a pipeline's output (SQLite or PostgreSQL) with plain queries over its views. */
export async function readReportData(reader: Reader, filter: ReportFilter): Promise<ReportData> {
  const { table } = filter;
  const d = reader.dialect;
  const t = reader.name(table);
  const data: ReportData = { database: reader.label, runs: [], rowCount: 0, rankBuckets: [], domains: [], histories: [], overlaps: [], tracked: [] };
  if (await reader.exists('runs', 'state')) data.runs = await readRuns(reader, filter.maxRuns);
  data.keySpend = await readKeySpend(reader);
  if (!(await reader.exists(table))) return data;
  const all = filterClause(filter);
  data.rowCount = finite(first(await reader.all(sql.rowCount(t, all.sql, d), all.params))) ?? 0;
  if (data.rowCount === 0) return data;

  const rankings = viewName(table, 'rankings');
  if (await reader.exists(rankings)) {
    // Counted by the database: one row, however many ranks (reading each grows with them:
    // docs/benchmarks.md#figures-the-code-cites). A rank that is not a number (text in a tampered SQLite file) sorts
    // above every number, so it falls in no band, as before.
    const counts = (await reader.all(sql.rankBands(reader.name(rankings), all.sql, d, RANK_BANDS), all.params))[0] ?? {};
    data.rankBuckets = RANK_BANDS.map(([label], i) => ({ label, value: Math.max(0, finite(counts[`band${i}`]) ?? 0) }));
  }
  data.tracked = await readTracked(reader, filter);
  const domains = viewName(table, 'domains');
  if (await reader.exists(domains)) {
    data.domains = (await reader.all(sql.domains(reader.name(domains), all.sql, d), all.params)).map((row) => {
      const best = finite(row.best);
      return { label: text(row.domain) || '(no domain)', value: Math.max(0, finite(row.results) ?? 0), note: best === undefined ? 'no rank' : `best rank #${best}` };
    });
  }

  // Values read back to query the database again (a query, a country, a run) are kept as they are for the query,
  // and converted for the page.
  const queries: unknown[] =
    filter.query !== undefined
      ? [filter.query]
      : (await reader.all(sql.topQueries(t, d), [filter.maxQueries])).map((row) => row.query);
  // How each series ended in each run, where the table records it (docs/analytics.md#failed-and-unreached-series); a
  // table written before it was has none, and every run of it reads as complete.
  const outcomes = (await reader.exists(outcomesTable(table))) ? reader.name(outcomesTable(table)) : undefined;
  // A run whose series all failed before their first page has no rows, but is a run all the same.
  const runIds = (await reader.all(sql.latestRuns(t, outcomes, d), [filter.maxRuns])).map((row) => row.run_id).reverse();
  const overlap = viewName(table, 'overlap');
  const hasOverlap = await reader.exists(overlap);
  for (const query of queries) {
    const place = (await reader.all(sql.place(t, d, filter.country !== undefined), [query, ...(filter.country !== undefined ? [filter.country] : [])]))[0];
    if (place) data.histories.push(await history(reader, { t, outcomes }, { query, country: place.country, lang: place.lang }, runIds, filter.maxLines));
    if (hasOverlap) {
      const pairs = (await reader.all(sql.overlap(reader.name(overlap)), [query])).map((p) => {
        const jaccard = finite(p.jaccard);
        // A similarity is in [0, 1]: anything else is shown as no value.
        return { lang: text(p.lang), a: text(p.country_a), b: text(p.country_b), jaccard: jaccard !== undefined && jaccard >= 0 && jaccard <= 1 ? jaccard : undefined };
      });
      if (pairs.length > 0) {
        const lang = (pairs[0] as { lang: string }).lang;
        const mine = pairs.filter((p) => p.lang === lang);
        const countries = [...new Set(mine.flatMap((p) => [p.a, p.b]))].sort();
        const values = mine.flatMap((p): [string, number][] => (p.jaccard === undefined ? [] : [[`${p.a}|${p.b}`, p.jaccard]]));
        data.overlaps.push({ query: text(query), lang, countries, pairs: new Map(values) });
      }
    }
  }
  return data;
}

/**
 * The best results of the series' latest complete run among `runIds`, and their rank in each run (null where they were
 * not seen, or the series did not complete).
 */
async function history(
  reader: Reader,
  tables: { t: string; outcomes: string | undefined },
  where: { query: unknown; country: unknown; lang: unknown },
  runIds: unknown[],
  maxLines: number,
): Promise<ReportData['histories'][number]> {
  const { t, outcomes } = tables;
  const { query, country, lang } = where;
  const d = reader.dialect;
  // Why the series did not complete, by run (text(): a tampered reason is shown as text, never as markup).
  const incomplete = new Map<unknown, string>();
  const skipped = new Set<unknown>();
  let latest = runIds.at(-1);
  if (outcomes !== undefined && runIds.length > 0) {
    const ended = await reader.all(sql.seriesOutcomes(outcomes, d, runIds.length), [query, country, lang, ...runIds]);
    // A run whose refresh plan skipped the series did not try it: not a failure, nothing to shade (its lines have a gap).
    for (const row of ended) if (finite(row.complete) !== 1 && row.reason !== SKIPPED) incomplete.set(row.run_id, text(row.reason) || 'incomplete');
    for (const row of ended) if (row.reason === SKIPPED) skipped.add(row.run_id);
    latest = ended.filter((row) => finite(row.complete) === 1).at(-1)?.run_id ?? latest;
  }
  const keys = await reader.all(sql.bestResults(t, d), [query, country, lang, latest, maxLines]);
  const series: { label: string; ranks: (number | null)[] }[] = [];
  for (const k of keys) {
    const ranks: (number | null)[] = [];
    for (const run of runIds) {
      // A run the series did not complete was not checked to the end: no rank, rather than a drop.
      if (incomplete.has(run)) ranks.push(null);
      else ranks.push(finite(first(await reader.all(sql.rankIn(t), [query, country, lang, run, k.dedupe_key]))) ?? null);
    }
    // A title where any row of it has one; else its domain and path, which read better than a bare URL.
    series.push({ label: text(k.title) || urlLabel(text(k.url)) || text(k.dedupe_key), ranks });
  }
  return {
    query: text(query),
    country: text(country),
    lang: text(lang),
    runs: runIds.map((run) => shortRun(text(run))),
    incomplete: runIds.map((run) => incomplete.get(run) ?? null),
    skipped: runIds.map((run) => skipped.has(run)),
    series,
  };
}

async function readRuns(reader: Reader, maxRuns: number): Promise<RunRow[]> {
  const d = reader.dialect;
  const rows = await reader.all(sql.runs(reader.name('runs', 'state'), d, MAX_SUMMARY), [maxRuns]);
  // The spend of the runs shown, not of every run on record.
  const spend = new Map<unknown, { credits: unknown; uncertain: unknown }>();
  if (rows.length > 0 && (await reader.exists('spend', 'state'))) {
    const sums = await reader.all(sql.spend(reader.name('spend', 'state'), d, rows.length), rows.map((row) => row.run_id));
    for (const row of sums) spend.set(row.run_id, row as { credits: unknown; uncertain: unknown });
  }
  return rows.reverse().map((row) => {
    const summary = storedSummary(row.summary);
    const spent = spend.get(row.run_id);
    return {
      runId: text(row.run_id),
      pipeline: text(row.pipeline),
      status: text(row.status),
      reason: summary.reason === undefined ? undefined : text(summary.reason),
      startedAt: text(row.started_at),
      durationMs: summary.durationMs,
      requests: summary.requests?.total,
      credits: finite(spent?.credits) ?? 0,
      uncertain: finite(spent?.uncertain) ?? 0,
      rows: summary.items?.written,
      keys: reportKeys(summary.keys),
    };
  });
}

/** `2026-11-21T22-30-05-123Z-a1b2c3` → `11-21 22:30:05`: short enough for an axis. */
export function shortRun(runId: string): string {
  const match = /^\d{4}-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})/.exec(runId);
  return match ? `${match[1]}-${match[2]} ${match[3]}:${match[4]}:${match[5]}` : runId.slice(0, 19);
}

export { OVERLAP_TOP };
