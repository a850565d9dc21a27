import type Database from 'better-sqlite3';
import { quoteIdentifier } from '../sql-identifier.ts';
import { viewStatements } from './statements.ts';

/** The analytics views over a results table, by report name. */
export type ResultsView = 'rankings' | 'domains' | 'overlap' | 'changes';

/** The URLs compared between countries by the overlap view: the top N of each. */
export const OVERLAP_TOP = 10;

/** Views get the results table's name in front, except for the default table: `report_rankings`, `serp_report_rankings`. */
export function viewName(table: string, view: ResultsView | 'spend'): string {
  return table === 'results' || view === 'spend' ? `report_${view}` : `${table}_report_${view}`;
}

/**
 * Which views are true to the data. `changes` needs every run's rows (append); every view needs each series' rows
 * complete, which a dedupe wider than the series breaks (an item shared by two countries is kept in one only).
 */
export function applicableViews(mode: 'append' | 'replace' | 'upsert', seriesComplete: boolean): ResultsView[] {
  if (!seriesComplete) return [];
  return mode === 'append' ? ['rankings', 'domains', 'overlap', 'changes'] : ['rankings', 'domains', 'overlap'];
}

/**
 * The two SQL dialects the views are written in. The views are one text; these are the few places SQLite and
 * PostgreSQL differ: counts and sums of integers (bigint, which node-postgres hands over as text), rounded averages
 * (numeric, likewise), text order (PostgreSQL's follows the database's collation; the views compare bytes, as SQLite
 * does, so that both answer the same), and booleans.
 */
export interface Dialect {
  int(expression: string): string;
  real(expression: string): string;
  /** `expression` compared and ordered by its bytes. */
  bytes(expression: string): string;
  isTrue(expression: string): string;
}

export const SQLITE: Dialect = { int: (e) => e, real: (e) => e, bytes: (e) => e, isTrue: (e) => `${e} = 1` };
export const POSTGRES: Dialect = { int: (e) => `(${e})::int`, real: (e) => `(${e})::float8`, bytes: (e) => `${e} COLLATE "C"`, isTrue: (e) => e };

/**
 * The views over a results table `t` (quoted, qualified if need be), named by `name`, in the order they depend on
 * each other. Plain SQL, readable by any SQLite tool (no FULL JOIN, which older ones lack). Run ids sort by time, so
 * the latest run is the greatest.
 */
export function resultsViewsSql(t: string, name: (view: ResultsView) => string, d: Dialect): Record<ResultsView, string> {
  return {
    // The rows of the latest run that has each (query, country, lang), best rank first.
    rankings: `
      SELECT r.query, r.country, r.lang, r.rank, r.title, r.url, r.domain, r.page, r.position, r.dedupe_key, r.run_id, r.fetched_at
      FROM ${t} r
      JOIN (SELECT query, country, lang, MAX(${d.bytes('run_id')}) AS run_id FROM ${t} GROUP BY query, country, lang) latest
        ON latest.query = r.query AND latest.country = r.country AND latest.lang = r.lang AND latest.run_id = r.run_id`,
    // Who dominates a query in a country: results, best and average rank, share of the latest results.
    domains: `
      SELECT query, country, domain, ${d.int('COUNT(*)')} AS results, MIN(rank) AS best_rank, ${d.real('ROUND(AVG(rank), 2)')} AS average_rank,
        ${d.real('ROUND(1.0 * COUNT(*) / SUM(COUNT(*)) OVER (PARTITION BY query, country), 4)')} AS share
      FROM ${name('rankings')} WHERE domain IS NOT NULL
      GROUP BY query, country, domain`,
    // How alike two countries' top ${OVERLAP_TOP} are for a query: Jaccard similarity of their URL sets.
    overlap: `
      WITH top AS (SELECT DISTINCT query, lang, country, dedupe_key FROM ${name('rankings')} WHERE rank <= ${OVERLAP_TOP} AND dedupe_key IS NOT NULL),
      sizes AS (SELECT query, lang, country, ${d.int('COUNT(*)')} AS n FROM top GROUP BY query, lang, country),
      shared AS (
        SELECT a.query, a.lang, a.country AS country_a, b.country AS country_b, ${d.int('COUNT(*)')} AS n
        FROM top a JOIN top b ON a.query = b.query AND a.lang = b.lang AND a.dedupe_key = b.dedupe_key AND ${d.bytes('a.country')} < ${d.bytes('b.country')}
        GROUP BY a.query, a.lang, a.country, b.country)
      SELECT a.query, a.lang, a.country AS country_a, b.country AS country_b, COALESCE(s.n, 0) AS shared, a.n AS top_a, b.n AS top_b,
        ${d.real('ROUND(1.0 * COALESCE(s.n, 0) / (a.n + b.n - COALESCE(s.n, 0)), 4)')} AS jaccard
      FROM sizes a JOIN sizes b ON a.query = b.query AND a.lang = b.lang AND ${d.bytes('a.country')} < ${d.bytes('b.country')}
      LEFT JOIN shared s ON s.query = a.query AND s.lang = a.lang AND s.country_a = a.country AND s.country_b = b.country`,
    // What changed between the last two runs: new, lost, up, down (rank_delta > 0 is up), same.
    changes: `
      WITH latest AS (SELECT DISTINCT ${d.bytes('run_id')} AS run_id FROM ${t} ORDER BY run_id DESC LIMIT 2),
      cur AS (SELECT query, country, lang, dedupe_key, MIN(rank) AS rank, MAX(${d.bytes('url')}) AS url, MAX(${d.bytes('title')}) AS title FROM ${t}
              WHERE run_id = (SELECT MAX(run_id) FROM latest) AND dedupe_key IS NOT NULL GROUP BY query, country, lang, dedupe_key),
      prev AS (SELECT query, country, lang, dedupe_key, MIN(rank) AS rank, MAX(${d.bytes('url')}) AS url, MAX(${d.bytes('title')}) AS title FROM ${t}
               WHERE run_id = (SELECT MIN(run_id) FROM latest) AND (SELECT COUNT(*) FROM latest) = 2 AND dedupe_key IS NOT NULL
               GROUP BY query, country, lang, dedupe_key)
      SELECT c.query, c.country, c.lang, c.dedupe_key, c.url, c.title, p.rank AS previous_rank, c.rank AS current_rank,
        p.rank - c.rank AS rank_delta,
        CASE WHEN p.rank IS NULL THEN 'new' WHEN c.rank < p.rank THEN 'up' WHEN c.rank > p.rank THEN 'down' ELSE 'same' END AS change
      FROM cur c LEFT JOIN prev p ON p.query = c.query AND p.country = c.country AND p.lang = c.lang AND p.dedupe_key = c.dedupe_key
      UNION ALL
      SELECT p.query, p.country, p.lang, p.dedupe_key, p.url, p.title, p.rank, NULL, NULL, 'lost'
      FROM prev p LEFT JOIN cur c ON c.query = p.query AND c.country = p.country AND c.lang = p.lang AND c.dedupe_key = p.dedupe_key
      WHERE c.dedupe_key IS NULL`,
  };
}

/** Views in the order they are dropped (dependents first) and created. */
export const DROP_ORDER = ['changes', 'overlap', 'domains', 'rankings'] as const;
export const CREATE_ORDER = ['rankings', 'domains', 'overlap', 'changes'] as const;

/** Creates (or re-creates, so that they follow the table) the views over a SQLite results table. */
export function createResultsViews(db: Database.Database, table: string, views: readonly ResultsView[]): void {
  const name = (view: ResultsView) => quoteIdentifier(viewName(table, view));
  const sql = resultsViewsSql(quoteIdentifier(table), name, SQLITE);
  db.transaction(() => {
    for (const view of DROP_ORDER) db.exec(viewStatements.drop(name(view)));
    for (const view of CREATE_ORDER) if (views.includes(view)) db.exec(viewStatements.create(name(view), sql[view]));
  })();
}

/** Spend per run, query, country and endpoint, from the ledger's `spend` and `series` (qualified by `schema.` if need be). */
export function spendViewSql(prefix: string, d: Dialect): string {
  return `
      SELECT s.run_id, COALESCE(se.query, '') AS query, COALESCE(se.country, '') AS country, s.path AS endpoint,
        ${d.int('COUNT(*)')} AS requests, ${d.int("SUM(CASE WHEN s.status LIKE '2__' THEN 1 ELSE 0 END)")} AS answered,
        ${d.real('SUM(s.credits)')} AS credits, ${d.real(`SUM(CASE WHEN ${d.isTrue('s.uncertain')} THEN s.credits ELSE 0 END)`)} AS uncertain_credits,
        ${d.real(`SUM(CASE WHEN ${d.isTrue('s.uncommitted')} THEN s.credits ELSE 0 END)`)} AS uncommitted_credits
      FROM ${prefix}spend s LEFT JOIN ${prefix}series se ON se.run_id = s.run_id AND se.series_id = s.series_id
      GROUP BY s.run_id, se.query, se.country, s.path`;
}

/** The spend view, in the SQLite state store. */
export function createSpendView(db: Database.Database): void {
  const name = quoteIdentifier(viewName('results', 'spend'));
  db.exec(`${viewStatements.drop(name)}; ${viewStatements.create(name, spendViewSql('', SQLITE))}`);
}
