import { POSTGRES } from './dialect.ts';

/**
 * The end of PostgreSQL's `changes` view (statements.ts, `resultsViewsSql`), from its `cur` on; SQLite's is written
 * there. PostgreSQL takes each CTE joined to another for a row or ten (its estimate of a join on four columns), and so
 * compared each of prev's rows with all of cur's, and cur's with all of compared's: at 1,000 series, 10,000 × 10,000
 * comparisons, 9 s (docs/benchmarks.md#a-year-on-one-database). Here no CTE is joined to another: cur and prev carry
 * their series' runs, each row's previous rank is looked up in the table by its series index (`rowsAt`), in a CTE
 * MATERIALIZED so that it is looked up once, not once for each column that names it, and a lost row is one the current
 * run has no row of, looked up likewise. `t`: the results table; `tagsOf`, `tagCells`, `failedTags`: the tag columns'
 * parts, as statements.ts makes them.
 */
export function postgresChangesEnd(
  t: string,
  rowsAt: (a: string, run: string) => string,
  tagsOf: (rows: string) => string,
  tagCells: (from: (column: string) => string) => string,
  failedTags: string,
): string {
  const d = POSTGRES;
  const rowsOf = (run: 'run_id' | 'previous_run_id') => `
        SELECT r.query, r.country, r.lang, r.dedupe_key, MIN(r.rank) AS rank, MAX(${d.bytes('r.url')}) AS url, MAX(${d.bytes('r.title')}) AS title${tagsOf('r')},
          x.run_id, x.previous_run_id
        FROM compared x CROSS JOIN ${t} r
        WHERE ${rowsAt('x', `x.${run}`)} AND r.dedupe_key IS NOT NULL
        GROUP BY r.query, r.country, r.lang, r.dedupe_key, x.run_id, x.previous_run_id`;
  return `cur AS (${rowsOf('run_id')}),
      prev AS (${rowsOf('previous_run_id')}),
      ranked AS MATERIALIZED (
        SELECT c.*, (SELECT MIN(r.rank) FROM ${seriesRows(t, rowsAt('c', 'c.previous_run_id'))} WHERE r.dedupe_key = c.dedupe_key) AS previous_rank FROM cur c)${failedTags}
      SELECT c.query, c.country, c.lang, c.dedupe_key, c.url, c.title, c.previous_rank, c.rank AS current_rank,
        c.previous_rank - c.rank AS rank_delta,
        CASE WHEN c.previous_rank IS NULL THEN 'new' WHEN c.rank < c.previous_rank THEN 'up' WHEN c.rank > c.previous_rank THEN 'down' ELSE 'same' END AS change,
        c.run_id, c.previous_run_id, NULL AS reason${tagCells((column) => `c.${column}`)}
      FROM ranked c
      UNION ALL
      SELECT p.query, p.country, p.lang, p.dedupe_key, p.url, p.title, p.rank, NULL, NULL, 'lost', p.run_id, p.previous_run_id, NULL${tagCells((column) => `p.${column}`)}
      FROM prev p
      WHERE NOT EXISTS (SELECT 1 FROM ${seriesRows(t, rowsAt('p', 'p.run_id'))} WHERE r.dedupe_key = p.dedupe_key)`;
}

/**
 * A series' rows in a run of the results table `t` (as `r`), `at` saying which (`rowsAt`), read by the series index
 * alone: OFFSET 0 keeps the caller's test of the dedupe key out of the lookup, where PostgreSQL would AND the series
 * index with the dedupe key's, reading the ~450 entries a key has in a year to find one of a series' ten rows (10,000
 * lookups each way: 0.3 s of `changes` each at a year: docs/benchmarks.md#a-year-on-one-database).
 */
function seriesRows(t: string, at: string): string {
  return `(SELECT r.rank, r.dedupe_key FROM ${t} r WHERE ${at} OFFSET 0) r`;
}
