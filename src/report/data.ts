import type Database from 'better-sqlite3';
import { z } from 'zod';
import { filterClause } from '../analytics/filter.ts';
import { OVERLAP_TOP, viewName } from '../analytics/views.ts';

/*
 * The database is a file like any other: whoever could write it could put text where a number belongs, markup in
 * any string, a blob or NULL anywhere, a view that returns anything. Everything read here is converted on the way
 * in — text to a string (clipped), numbers to finite numbers or nothing — so that the page only ever handles the
 * types it declares (and escapes every string it writes: report.ts, svg.ts).
 */

/** Longer strings are clipped: a label is for reading, and a tampered database could hold megabytes in one. */
const MAX_TEXT = 300;

/** A value shown as text: a string as it is (clipped), a number as its digits; NULL, a blob or anything else as ''. */
export function text(value: unknown): string {
  const string = typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'bigint' ? String(value) : '';
  return string.length > MAX_TEXT ? `${string.slice(0, MAX_TEXT - 1)}…` : string;
}

/** A value used as a number: a finite number (SQLite may hand back a bigint), or undefined for anything else. */
export function finite(value: unknown): number | undefined {
  const number = typeof value === 'bigint' ? Number(value) : value;
  return typeof number === 'number' && Number.isFinite(number) ? number : undefined;
}

/** Summaries bigger than this are not read (a real one is a few KB). */
const MAX_SUMMARY = 1_000_000;

/** What the report reads of a run's stored summary: each field kept only if it has its type, dropped otherwise. */
const storedSummarySchema = z
  .object({
    reason: z.string().optional().catch(undefined),
    durationMs: z.number().optional().catch(undefined),
    requests: z.object({ total: z.number().optional().catch(undefined) }).optional().catch(undefined),
    items: z.object({ written: z.number().optional().catch(undefined) }).optional().catch(undefined),
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
}

export interface ReportData {
  database: string;
  runs: RunRow[];
  rowCount: number;
  rankBuckets: { label: string; value: number }[];
  domains: { label: string; value: number; note: string }[];
  histories: { query: string; country: string; lang: string; runs: string[]; series: { label: string; ranks: (number | null)[] }[] }[];
  overlaps: { query: string; lang: string; countries: string[]; pairs: Map<string, number> }[];
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

const has = (db: Database.Database, name: string) => db.prepare(`SELECT 1 FROM sqlite_master WHERE name = ?`).get(name) !== undefined;

/** Everything the report shows, read from a pipeline's SQLite output with plain queries over its views. */
export function readReportData(db: Database.Database, filter: ReportFilter): ReportData {
  const { table } = filter;
  const data: ReportData = { database: db.name, runs: [], rowCount: 0, rankBuckets: [], domains: [], histories: [], overlaps: [] };
  if (has(db, 'runs')) data.runs = readRuns(db, filter.maxRuns);
  if (!has(db, table)) return data;
  const all = filterClause(filter);
  data.rowCount = finite(db.prepare(`SELECT COUNT(*) FROM "${table}" ${all.sql}`).pluck().get(...all.params)) ?? 0;
  if (data.rowCount === 0) return data;

  const rankings = viewName(table, 'rankings');
  if (has(db, rankings)) {
    const ranks = (db.prepare(`SELECT rank FROM "${rankings}" ${all.sql}`).pluck().all(...all.params) as unknown[]).map(finite);
    data.rankBuckets = RANK_BANDS.map(([label, from, to]) => ({ label, value: ranks.filter((r) => r !== undefined && r >= from && r <= to).length }));
  }
  const domains = viewName(table, 'domains');
  if (has(db, domains)) {
    data.domains = (
      db
        .prepare(`SELECT domain, SUM(results) AS results, MIN(best_rank) AS best FROM "${domains}" ${all.sql} GROUP BY domain ORDER BY results DESC, best, domain LIMIT 12`)
        .all(...all.params) as { domain: unknown; results: unknown; best: unknown }[]
    ).map((d) => {
      const best = finite(d.best);
      return { label: text(d.domain) || '(no domain)', value: Math.max(0, finite(d.results) ?? 0), note: best === undefined ? 'no rank' : `best rank #${best}` };
    });
  }

  // Values read back to query the database again (a query, a country, a run) are kept as they are for the query,
  // and converted for the page.
  const queries: unknown[] =
    filter.query !== undefined ? [filter.query] : db.prepare(`SELECT query FROM "${table}" GROUP BY query ORDER BY COUNT(*) DESC, query LIMIT ?`).pluck().all(filter.maxQueries);
  const runIds = db.prepare(`SELECT DISTINCT run_id FROM "${table}" ORDER BY run_id DESC LIMIT ?`).pluck().all(filter.maxRuns).reverse();
  for (const query of queries) {
    const place = db
      .prepare(`SELECT country, lang FROM "${table}" WHERE query = ? ${filter.country !== undefined ? 'AND country = ?' : ''} GROUP BY country, lang ORDER BY COUNT(*) DESC, country LIMIT 1`)
      .get(...[query, ...(filter.country !== undefined ? [filter.country] : [])]) as { country: unknown; lang: unknown } | undefined;
    if (place) data.histories.push(history(db, table, query, place.country, place.lang, runIds, filter.maxLines));
    const overlap = viewName(table, 'overlap');
    if (has(db, overlap)) {
      const pairs = (db.prepare(`SELECT lang, country_a, country_b, jaccard FROM "${overlap}" WHERE query = ?`).all(query) as Record<string, unknown>[]).map((p) => {
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

/** The best results of the latest run, and their rank in each run (null where they were not seen). */
function history(db: Database.Database, table: string, query: unknown, country: unknown, lang: unknown, runIds: unknown[], maxLines: number): ReportData['histories'][number] {
  const latest = runIds.at(-1);
  const keys = db
    .prepare(`SELECT dedupe_key, MIN(rank) AS rank, MAX(COALESCE(title, url, dedupe_key)) AS label FROM "${table}"
      WHERE query = ? AND country = ? AND lang = ? AND run_id = ? AND dedupe_key IS NOT NULL GROUP BY dedupe_key ORDER BY rank LIMIT ?`)
    .all(query, country, lang, latest, maxLines) as { dedupe_key: unknown; label: unknown }[];
  const rankIn = db.prepare(`SELECT MIN(rank) FROM "${table}" WHERE query = ? AND country = ? AND lang = ? AND run_id = ? AND dedupe_key = ?`).pluck();
  return {
    query: text(query),
    country: text(country),
    lang: text(lang),
    runs: runIds.map((run) => shortRun(text(run))),
    series: keys.map((k) => ({
      label: text(k.label) || text(k.dedupe_key),
      ranks: runIds.map((run) => finite(rankIn.get(query, country, lang, run, k.dedupe_key)) ?? null),
    })),
  };
}

function readRuns(db: Database.Database, maxRuns: number): RunRow[] {
  const spend = new Map<unknown, { credits: unknown; uncertain: unknown }>();
  if (has(db, 'spend')) {
    const sums = db.prepare(`SELECT run_id, SUM(credits) AS credits, SUM(CASE WHEN uncertain = 1 THEN credits ELSE 0 END) AS uncertain FROM spend GROUP BY run_id`).all();
    for (const row of sums as { run_id: unknown; credits: unknown; uncertain: unknown }[]) spend.set(row.run_id, row);
  }
  const rows = db
    .prepare(`SELECT run_id, pipeline, status, started_at, CASE WHEN length(summary) <= ${MAX_SUMMARY} THEN summary END AS summary FROM runs
      WHERE status <> 'abandoned' ORDER BY started_at DESC, rowid DESC LIMIT ?`)
    .all(maxRuns) as Record<string, unknown>[];
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
    };
  });
}

/** `2026-11-21T22-30-05-123Z-a1b2c3` → `11-21 22:30:05`: short enough for an axis. */
export function shortRun(runId: string): string {
  const match = /^\d{4}-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})/.exec(runId);
  return match ? `${match[1]}-${match[2]} ${match[3]}:${match[4]}:${match[5]}` : runId.slice(0, 19);
}

export { OVERLAP_TOP };
