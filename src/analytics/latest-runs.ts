import { type Dialect, POSTGRES } from './dialect.ts';

/**
 * Each series (query, country, lang) of a results table and its latest run, as common table expressions ending in
 * one named `name` (columns query, country, lang, run_id), for the views' WITH clause (statements.ts).
 *
 * A GROUP BY over the table reads every row's series and run: a year of daily runs of 1,000 series is 3.65 million
 * index entries, hundreds of milliseconds for 1,000 answers (docs/benchmarks.md#a-year-on-one-database). Where the
 * table has its series index, (query, country, lang, run_id) in that order (SQLite's sink makes it: `seriesIndex` in
 * sinks/statements.ts), the series are walked along the index instead, one seek for each query, country and lang
 * after the last (`MIN(…) WHERE … > …`, which SQLite answers from the index's next entry), and each series' latest run
 * is one more (`MAX(run_id)`): some thousands of seeks, however many runs the table holds. `recursive`: the WITH
 * clause must say RECURSIVE.
 */
export function latestRunsCtes(t: string, name: string, d: Dialect, seriesIndexed: boolean): { recursive: boolean; sql: string } {
  if (!seriesIndexed) {
    return { recursive: false, sql: `${name} AS (SELECT query, country, lang, MAX(${d.bytes('run_id')}) AS run_id FROM ${t} GROUP BY query, country, lang)` };
  }
  if (d === POSTGRES) return postgresWalk(t, name);
  const next = (column: string, where: string) => `(SELECT MIN(i.${column}) FROM ${t} i WHERE ${where})`;
  return {
    recursive: true,
    sql: `${name}_queries(query) AS (
        SELECT ${next('query', '1 = 1')}
        UNION ALL SELECT ${next('query', 'i.query > w.query')} FROM ${name}_queries w WHERE w.query IS NOT NULL),
      ${name}_countries(query, country) AS (
        SELECT w.query, ${next('country', 'i.query = w.query')} FROM ${name}_queries w WHERE w.query IS NOT NULL
        UNION ALL SELECT w.query, ${next('country', 'i.query = w.query AND i.country > w.country')} FROM ${name}_countries w WHERE w.country IS NOT NULL),
      ${name}_langs(query, country, lang) AS (
        SELECT w.query, w.country, ${next('lang', 'i.query = w.query AND i.country = w.country')} FROM ${name}_countries w WHERE w.country IS NOT NULL
        UNION ALL SELECT w.query, w.country, ${next('lang', 'i.query = w.query AND i.country = w.country AND i.lang > w.lang')} FROM ${name}_langs w WHERE w.lang IS NOT NULL),
      ${name} AS (
        SELECT w.query, w.country, w.lang, (SELECT MAX(i.run_id) FROM ${t} i WHERE i.query = w.query AND i.country = w.country AND i.lang = w.lang) AS run_id
        FROM ${name}_langs w WHERE w.lang IS NOT NULL)`,
  };
}

/**
 * The same walk along PostgreSQL's series index, (md5(query), country, lang, run_id COLLATE "C") (`seriesRunsIndex` in
 * sinks/statements.ts: a B-tree entry holds 2,704 bytes, a query may be longer, so the index takes its digest): one
 * seek for each series after the last, (digest, country, lang) compared as a row, and one for each series' latest row
 * (`LATERAL … LIMIT 1`), which gives back the query itself. One recursive CTE, not one a column as above: PostgreSQL
 * takes each recursive CTE for ten times the rows it starts from, and three nested ones for a million series, which
 * made it compile the view's plan (JIT: 1.5 s of a 1.7 s read at 1,000 series). Two queries of one digest would be
 * walked as one series (the latest row's query), as the upsert key and the outcomes' key already take them for one.
 */
function postgresWalk(t: string, name: string): { recursive: boolean; sql: string } {
  const key = 'md5(i.query), i.country, i.lang';
  return {
    recursive: true,
    sql: `${name}_keys(h, country, lang) AS (
        SELECT * FROM (SELECT ${key} FROM ${t} i ORDER BY ${key} LIMIT 1) f
        UNION ALL
        SELECT n.* FROM ${name}_keys w CROSS JOIN LATERAL (SELECT ${key} FROM ${t} i WHERE (${key}) > (w.h, w.country, w.lang) ORDER BY ${key} LIMIT 1) n),
      ${name} AS (
        SELECT m.query, w.country, w.lang, m.run_id FROM ${name}_keys w
        CROSS JOIN LATERAL (SELECT i.query, i.run_id COLLATE "C" AS run_id FROM ${t} i WHERE md5(i.query) = w.h AND i.country = w.country AND i.lang = w.lang
          AND i.run_id IS NOT NULL ORDER BY i.run_id COLLATE "C" DESC LIMIT 1) m)`,
  };
}
