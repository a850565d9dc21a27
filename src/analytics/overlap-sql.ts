import { type Dialect, POSTGRES } from './dialect.ts';

/**
 * The `overlap` view's text in the dialect `d`: how alike two countries' top `top` are for a query, the Jaccard
 * similarity of their URL sets, over `rankings` (the rankings view, quoted and qualified), the same columns and numbers
 * in both. SQLite's joins the pairs of countries with the URLs they share (plain SQL, no FULL JOIN).
 */
export function overlapSql(rankings: string, top: number, d: Dialect): string {
  if (d === POSTGRES) return postgresOverlapSql(rankings, top);
  return `
      WITH top AS (SELECT DISTINCT query, lang, country, dedupe_key FROM ${rankings} WHERE rank <= ${top} AND dedupe_key IS NOT NULL),
      sizes AS (SELECT query, lang, country, ${d.int('COUNT(*)')} AS n FROM top GROUP BY query, lang, country),
      shared AS (
        SELECT a.query, a.lang, a.country AS country_a, b.country AS country_b, ${d.int('COUNT(*)')} AS n
        FROM top a JOIN top b ON a.query = b.query AND a.lang = b.lang AND a.dedupe_key = b.dedupe_key AND ${d.bytes('a.country')} < ${d.bytes('b.country')}
        GROUP BY a.query, a.lang, a.country, b.country)
      SELECT a.query, a.lang, a.country AS country_a, b.country AS country_b, COALESCE(s.n, 0) AS shared, a.n AS top_a, b.n AS top_b,
        ${d.real('ROUND(1.0 * COALESCE(s.n, 0) / (a.n + b.n - COALESCE(s.n, 0)), 4)')} AS jaccard
      FROM sizes a JOIN sizes b ON a.query = b.query AND a.lang = b.lang AND ${d.bytes('a.country')} < ${d.bytes('b.country')}
      LEFT JOIN shared s ON s.query = a.query AND s.lang = a.lang AND s.country_a = a.country AND s.country_b = b.country`;
}

/**
 * PostgreSQL's `overlap` view (`overlapSql` writes SQLite's): how alike two countries' top `top`
 * are for a query, the Jaccard similarity of their URL sets, over `rankings` (the rankings view, quoted and qualified),
 * with the same columns and numbers. SQLite's joins the pairs of countries with the URLs they share; PostgreSQL takes
 * both for a row or so (its estimate of the walks the rankings come from) and nested-looped them, comparing every pair
 * with every pair that shares a URL: 1.26 million comparisons at 1,000 series, 0.12-0.6 s, and four times as many for
 * each doubling of the series (docs/benchmarks.md#a-year-on-one-database). Here the pairs and the URLs shared are rows
 * of one UNION ALL, summed by pair: no join between them, one pass whatever the estimates.
 */
function postgresOverlapSql(rankings: string, top: number): string {
  const d = POSTGRES;
  const before = (a: string, b: string) => `${d.bytes(`${a}.country`)} < ${d.bytes(`${b}.country`)}`;
  return `
      WITH top AS (SELECT DISTINCT query, lang, country, dedupe_key FROM ${rankings} WHERE rank <= ${top} AND dedupe_key IS NOT NULL),
      sizes AS (SELECT query, lang, country, ${d.int('COUNT(*)')} AS n FROM top GROUP BY query, lang, country),
      counted AS (
        SELECT a.query, a.lang, a.country AS country_a, b.country AS country_b, 0 AS shared, a.n AS top_a, b.n AS top_b
        FROM sizes a JOIN sizes b ON a.query = b.query AND a.lang = b.lang AND ${before('a', 'b')}
        UNION ALL
        SELECT a.query, a.lang, a.country, b.country, 1, 0, 0
        FROM top a JOIN top b ON a.query = b.query AND a.lang = b.lang AND a.dedupe_key = b.dedupe_key AND ${before('a', 'b')}),
      pairs AS (
        SELECT query, lang, country_a, country_b, ${d.int('SUM(shared)')} AS shared, ${d.int('SUM(top_a)')} AS top_a, ${d.int('SUM(top_b)')} AS top_b
        FROM counted GROUP BY query, lang, country_a, country_b)
      SELECT query, lang, country_a, country_b, shared, top_a, top_b, ${d.real('ROUND(1.0 * shared / (top_a + top_b - shared), 4)')} AS jaccard
      FROM pairs`;
}
