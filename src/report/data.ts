import type Database from 'better-sqlite3';
import { filterClause } from '../analytics/filter.ts';
import { OVERLAP_TOP, viewName } from '../analytics/views.ts';

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
  data.rowCount = db.prepare(`SELECT COUNT(*) FROM "${table}" ${all.sql}`).pluck().get(...all.params) as number;
  if (data.rowCount === 0) return data;

  const rankings = viewName(table, 'rankings');
  if (has(db, rankings)) {
    const counts = db.prepare(`SELECT rank FROM "${rankings}" ${all.sql}`).pluck().all(...all.params) as (number | null)[];
    data.rankBuckets = RANK_BANDS.map(([label, from, to]) => ({ label, value: counts.filter((r) => r !== null && r >= from && r <= to).length }));
  }
  const domains = viewName(table, 'domains');
  if (has(db, domains)) {
    data.domains = (
      db
        .prepare(`SELECT domain, SUM(results) AS results, MIN(best_rank) AS best FROM "${domains}" ${all.sql} GROUP BY domain ORDER BY results DESC, best, domain LIMIT 12`)
        .all(...all.params) as { domain: string; results: number; best: number }[]
    ).map((d) => ({ label: d.domain, value: d.results, note: `best rank #${d.best}` }));
  }

  const queries =
    filter.query !== undefined
      ? [filter.query]
      : (db.prepare(`SELECT query FROM "${table}" GROUP BY query ORDER BY COUNT(*) DESC, query LIMIT ?`).pluck().all(filter.maxQueries) as string[]);
  const runIds = db.prepare(`SELECT DISTINCT run_id FROM "${table}" ORDER BY run_id DESC LIMIT ?`).pluck().all(filter.maxRuns).reverse() as string[];
  for (const query of queries) {
    const place = db
      .prepare(`SELECT country, lang FROM "${table}" WHERE query = ? ${filter.country !== undefined ? 'AND country = ?' : ''} GROUP BY country, lang ORDER BY COUNT(*) DESC, country LIMIT 1`)
      .get(...[query, ...(filter.country !== undefined ? [filter.country] : [])]) as { country: string; lang: string } | undefined;
    if (place) data.histories.push(history(db, table, query, place.country, place.lang, runIds, filter.maxLines));
    const overlap = viewName(table, 'overlap');
    if (has(db, overlap)) {
      const pairs = db.prepare(`SELECT lang, country_a, country_b, jaccard FROM "${overlap}" WHERE query = ?`).all(query) as { lang: string; country_a: string; country_b: string; jaccard: number }[];
      if (pairs.length > 0) {
        const lang = (pairs[0] as { lang: string }).lang;
        const mine = pairs.filter((p) => p.lang === lang);
        const countries = [...new Set(mine.flatMap((p) => [p.country_a, p.country_b]))].sort();
        data.overlaps.push({ query, lang, countries, pairs: new Map(mine.map((p) => [`${p.country_a}|${p.country_b}`, p.jaccard])) });
      }
    }
  }
  return data;
}

/** The best results of the latest run, and their rank in each run (null where they were not seen). */
function history(db: Database.Database, table: string, query: string, country: string, lang: string, runIds: string[], maxLines: number) {
  const latest = runIds.at(-1) as string;
  const keys = db
    .prepare(`SELECT dedupe_key, MIN(rank) AS rank, MAX(COALESCE(title, url, dedupe_key)) AS label FROM "${table}"
      WHERE query = ? AND country = ? AND lang = ? AND run_id = ? AND dedupe_key IS NOT NULL GROUP BY dedupe_key ORDER BY rank LIMIT ?`)
    .all(query, country, lang, latest, maxLines) as { dedupe_key: string; label: string }[];
  const rankIn = db.prepare(`SELECT MIN(rank) FROM "${table}" WHERE query = ? AND country = ? AND lang = ? AND run_id = ? AND dedupe_key = ?`).pluck();
  return {
    query,
    country,
    lang,
    runs: runIds.map(shortRun),
    series: keys.map((k) => ({ label: k.label, ranks: runIds.map((run) => (rankIn.get(query, country, lang, run, k.dedupe_key) as number | null) ?? null) })),
  };
}

function readRuns(db: Database.Database, maxRuns: number): RunRow[] {
  const spend = has(db, 'spend')
    ? new Map(
        (db.prepare(`SELECT run_id, SUM(credits) AS credits, SUM(CASE WHEN uncertain = 1 THEN credits ELSE 0 END) AS uncertain FROM spend GROUP BY run_id`).all() as {
          run_id: string;
          credits: number;
          uncertain: number;
        }[]).map((r) => [r.run_id, r]),
      )
    : new Map();
  const rows = db
    .prepare(`SELECT run_id, pipeline, status, started_at, summary FROM runs WHERE status <> 'abandoned' ORDER BY started_at DESC, rowid DESC LIMIT ?`)
    .all(maxRuns) as { run_id: string; pipeline: string; status: string; started_at: string; summary: string | null }[];
  return rows.reverse().map((row) => {
    const summary = row.summary ? (JSON.parse(row.summary) as { reason?: string; durationMs?: number; requests?: { total?: number }; items?: { written?: number } }) : {};
    const spent = spend.get(row.run_id) as { credits: number; uncertain: number } | undefined;
    return {
      runId: row.run_id,
      pipeline: row.pipeline,
      status: row.status,
      reason: summary.reason,
      startedAt: row.started_at,
      durationMs: summary.durationMs,
      requests: summary.requests?.total,
      credits: spent?.credits ?? 0,
      uncertain: spent?.uncertain ?? 0,
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
