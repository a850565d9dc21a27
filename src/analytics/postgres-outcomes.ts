import { NOT_REACHED, SKIPPED } from '../sinks/series-outcomes.ts';

/*
 * What PostgreSQL's views read of the outcomes table `o` (quoted, qualified) where it has its series index,
 * (md5(query), country, lang, run_id COLLATE "C") (`seriesRunsIndex` in sinks/statements.ts): each series' latest,
 * last complete and last tried runs, one lookup each along the index, rather than a GROUP BY over every row of every
 * run (a year of 1,000 series: 365,000 rows grouped and sorted, 1.7 s of `changes`; the failed series' join carried
 * 364,000: docs/benchmarks.md#a-year-on-one-database). The answers are SQLite's text's (statements.ts: `triedSql`,
 * `done`, `last_done`, `failed`, `compared`), which this replaces for PostgreSQL alone. A plan of lookups is also one
 * PostgreSQL prices low: the GROUP BYs and the correlated EXISTS it priced at a million and more, past `jit_above_cost`,
 * and compiling the plan took 1–1.5 s of a read. Two queries of one digest are walked as one series (the latest row's
 * query), as the results' walk (latest-runs.ts) and the outcomes' key already take them.
 */

/**
 * The rows of `o` (as `x`) of the series the relation `s` names (its query, country and lang), by the series index: by
 * the query's digest alone, as the table's key has it (two queries of one digest are one row of a run there). Naming
 * the query too makes PostgreSQL take the two for independent, expect a row of the series in a thousand to match, and
 * so read every run's row of it to sort them rather than walk the index back to the latest (0.34 ms a series against
 * 0.01 at a year).
 */
const ofSeries = (s: string) => `md5(x.query) = md5(${s}.query) AND x.country = ${s}.country AND x.lang = ${s}.lang`;

/** A LATERAL lookup of the latest row of the series `s` in `o` that `where` holds: its run (by bytes) and `columns`. */
const latestRow = (o: string, s: string, where: string, columns = '') =>
  `(SELECT x.run_id COLLATE "C" AS run_id${columns} FROM ${o} x WHERE ${ofSeries(s)}${where} ORDER BY x.run_id COLLATE "C" DESC LIMIT 1)`;

/**
 * `changes`' CTEs up to `compared`, as statements.ts names them (`tried`, `last_done`, `failed`, `compared`), for a
 * WITH RECURSIVE: the series walked along the index (one seek after the last, as `postgresWalk` does over the results),
 * then for each its latest row, its latest row that is not a skip (tried), its latest complete run (last done) and the
 * complete one before it. `tried`'s run is, as SQLite's: the latest run that did not skip it; but where that row is its
 * latest and says `not_reached`, the latest run recorded (not reached since, or it would have a row: `outcomesReadSql`).
 * `failed`: a tried run that did not complete, with why; a run with no row of the series did not reach it.
 */
export function postgresChangesStart(o: string): string {
  const key = 'md5(i.query), i.country, i.lang';
  return `outcome_keys(h, country, lang) AS (
        SELECT * FROM (SELECT ${key} FROM ${o} i ORDER BY ${key} LIMIT 1) f
        UNION ALL
        SELECT n.* FROM outcome_keys w CROSS JOIN LATERAL (SELECT ${key} FROM ${o} i WHERE (${key}) > (w.h, w.country, w.lang) ORDER BY ${key} LIMIT 1) n),
      outcome_series AS (
        SELECT l.query, l.country, l.lang, l.run_id AS last_run, l.reason AS last_reason, y.run_id AS tried_run, y.complete AS tried_complete,
          y.reason AS tried_reason, c.run_id AS done_run, p.run_id AS previous_done_run
        FROM outcome_keys w
        CROSS JOIN LATERAL (SELECT x.query, x.country, x.lang, x.run_id COLLATE "C" AS run_id, x.reason FROM ${o} x
          WHERE md5(x.query) = w.h AND x.country = w.country AND x.lang = w.lang ORDER BY x.run_id COLLATE "C" DESC LIMIT 1) l
        LEFT JOIN LATERAL ${latestRow(o, 'l', ` AND x.reason <> '${SKIPPED}'`, ', x.complete, x.reason')} y ON true
        LEFT JOIN LATERAL ${latestRow(o, 'l', ' AND x.complete = 1')} c ON true
        LEFT JOIN LATERAL ${latestRow(o, 'l', ' AND x.complete = 1 AND x.run_id COLLATE "C" < c.run_id')} p ON true),
      tried AS (
        SELECT query, country, lang,
          CASE WHEN tried_run = last_run AND last_reason = '${NOT_REACHED}' THEN ${lastRun(o)} ELSE tried_run END AS run_id,
          tried_run, tried_complete, tried_reason, done_run, previous_done_run
        FROM outcome_series WHERE tried_run IS NOT NULL),
      last_done AS (SELECT query, country, lang, done_run AS run_id FROM outcome_series WHERE done_run IS NOT NULL),
      failed AS (
        SELECT query, country, lang, run_id, CASE WHEN run_id = tried_run THEN tried_reason ELSE '${NOT_REACHED}' END AS reason
        FROM tried WHERE run_id <> tried_run OR tried_complete = 0),
      compared AS (SELECT query, country, lang, run_id, previous_done_run AS previous_run_id FROM tried WHERE run_id = done_run)`;
}

/** The latest run `o` records, by its runs index (`runsIndex` in sinks/statements.ts). */
const lastRun = (o: string) => `(SELECT MAX(run_id COLLATE "C") FROM ${o})`;

/**
 * `rankings`' `latest` and `aged` for a WITH RECURSIVE in PostgreSQL, after the results' walk: `latest` each series of
 * `seen` at its latest complete run, else its latest run (`complete`: looked up by the series index), or the walk
 * itself where runs are not history (`latest`: `seen` is named so); `aged` each with the runs recorded since, walked
 * along the runs index, a seek after the last (365 at a year, where a DISTINCT read every row), and counted by a
 * subquery rather than a join grouped again, which PostgreSQL took for a row per series and run (12,288 at a year) and
 * priced each with a lookup of its rows, past `jit_above_cost`; counted once a series (MATERIALIZED), not once for each
 * of its rows the view reads.
 */
export function postgresRankingsLatest(o: string, runs: 'complete' | 'latest'): string {
  const latest = `latest AS (
        SELECT s.query, s.country, s.lang, COALESCE(c.run_id, s.run_id) AS run_id
        FROM seen s LEFT JOIN LATERAL ${latestRow(o, 's', ' AND x.complete = 1')} c ON true),
      `;
  return `${runs === 'complete' ? latest : ''}runs(run_id) AS (
        SELECT MIN(run_id COLLATE "C") FROM ${o}
        UNION ALL
        SELECT (SELECT MIN(x.run_id COLLATE "C") FROM ${o} x WHERE x.run_id COLLATE "C" > u.run_id) FROM runs u WHERE u.run_id IS NOT NULL),
      aged AS MATERIALIZED (SELECT l.query, l.country, l.lang, l.run_id, (SELECT COUNT(*) FROM runs u WHERE u.run_id > l.run_id)::int AS age_runs FROM latest l)`;
}
