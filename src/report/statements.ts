import { type Dialect, POSTGRES } from '../analytics/dialect.ts';
import { NOT_REACHED } from '../sinks/series-outcomes.ts';

/*
 * Every statement the HTML report sends (data.ts), by name, as pure SQL of the relations it reads and the dialect
 * (the pg-boss `plans.ts` way): a results table `t`, its views and outcomes table, the state's `runs` and `spend`. The
 * names come quoted by sql-identifier.ts (a Reader's `name`, qualified by their schema in PostgreSQL), and `where` is a
 * filterClause; every value is bound (`?`, as a Reader takes it).
 */

export const reportStatements = {
  /** The table's rows, filtered. */
  rowCount: (t: string, where: string, d: Dialect) => `SELECT ${d.int('COUNT(*)')} FROM ${t} ${where}`,
  /**
   * The rankings counted by rank band (`bands`: from, to), one row, `band<i>` each: counted by the database, however
   * many ranks. A rank that is not a number (text in a tampered SQLite file) sorts above every number, in no band.
   */
  rankBands: (rankings: string, where: string, d: Dialect, bands: readonly (readonly [string, number, number])[]) =>
    `SELECT ${bands.map(([, from, to], i) => `${d.int(`COUNT(CASE WHEN rank BETWEEN ${from} AND ${to} THEN 1 END)`)} AS band${i}`).join(', ')} FROM ${rankings} ${where}`,
  /** The twelve domains with the most results, and each one's best rank. */
  domains: (domains: string, where: string, d: Dialect) =>
    `SELECT domain, ${d.int('SUM(results)')} AS results, MIN(best_rank) AS best FROM ${domains} ${where} GROUP BY domain ORDER BY results DESC, best, ${d.bytes('domain')} LIMIT 12`,
  /**
   * Each tracked domain in its series' latest run (`where`: a filterClause; then `?`: how many), by series and domain.
   */
  tracked: (view: string, where: string, d: Dialect) =>
    `SELECT * FROM (SELECT v.query, v.country, v.lang, v.domain, v.rank, v.searched, v.run_id FROM ${view} v
        JOIN (SELECT query, country, lang, MAX(${d.bytes('run_id')}) AS run_id FROM ${view} GROUP BY query, country, lang) l
          ON l.query = v.query AND l.country = v.country AND l.lang = v.lang AND l.run_id = v.run_id) x
      ${where} ORDER BY ${d.bytes('query')}, ${d.bytes('country')}, ${d.bytes('lang')}, ${d.bytes('domain')} LIMIT ?`,
  /**
   * Each tracked domain at its series' latest fetched run, with its age in runs, from `report_tracked_latest` (`where`: a
   * filterClause; then `?`: how many), by series and domain.
   */
  trackedLatest: (view: string, where: string, d: Dialect) =>
    `SELECT query, country, lang, domain, rank, searched, run_id, age_runs FROM ${view} ${where}
      ORDER BY ${d.bytes('query')}, ${d.bytes('country')}, ${d.bytes('lang')}, ${d.bytes('domain')} LIMIT ?`,
  /** The queries with the most rows (`?`: how many). */
  topQueries: (t: string, d: Dialect) => `SELECT query FROM ${t} GROUP BY query ORDER BY COUNT(*) DESC, ${d.bytes('query')} LIMIT ?`,
  /**
   * The latest runs, newest first (`?`: how many): of the table's rows, and of its outcomes table `o` where it has one
   * (a run whose series all failed before their first page has no rows, but is a run all the same).
   */
  latestRuns: (t: string, o: string | undefined, d: Dialect) =>
    `SELECT DISTINCT ${d.bytes('run_id')} AS run_id FROM ${o === undefined ? t : `(SELECT run_id FROM ${t} UNION ALL SELECT run_id FROM ${o}) u`} ORDER BY run_id DESC LIMIT ?`,
  /** A query's country and language with the most rows (`?`: the query; then the country, `byCountry`). */
  place: (t: string, d: Dialect, byCountry: boolean) =>
    `SELECT country, lang FROM ${t} WHERE query = ? ${byCountry ? 'AND country = ?' : ''} GROUP BY country, lang ORDER BY COUNT(*) DESC, ${d.bytes('country')} LIMIT 1`,
  /** A query's country pairs and how alike their results are (`?`: the query). */
  overlap: (overlap: string) => `SELECT lang, country_a, country_b, jaccard FROM ${overlap} WHERE query = ?`,
  /**
   * How a series ended in each of `runs` runs (`?`: query, country, lang, then the runs), as the views read outcomes
   * (`outcomesReadSql`): a run with no row of it did not reach it where its latest row before says `not_reached`.
   */
  seriesOutcomes: (o: string, d: Dialect, runs: number) =>
    `SELECT r.run_id, COALESCE(x.complete, 0) AS complete, COALESCE(x.reason, '${NOT_REACHED}') AS reason
      FROM (SELECT ? AS query, ? AS country, ? AS lang) s
      CROSS JOIN (${Array.from({ length: runs }, () => `SELECT ${d.bytes('CAST(? AS TEXT)')} AS run_id`).join(' UNION ALL ')}) r
      LEFT JOIN ${o} x ON x.query = s.query AND x.country = s.country AND x.lang = s.lang AND x.run_id = r.run_id
      WHERE x.run_id IS NOT NULL OR (SELECT p.reason FROM ${o} p WHERE p.query = s.query AND p.country = s.country AND p.lang = s.lang
        AND ${d.bytes('p.run_id')} < r.run_id ORDER BY ${d.bytes('p.run_id')} DESC LIMIT 1) = '${NOT_REACHED}'
      ORDER BY r.run_id`,
  /** A series' best results in a run, by dedupe key (`?`: query, country, lang, the run, how many). */
  bestResults: (t: string, d: Dialect) => `SELECT dedupe_key, MIN(rank) AS rank, MAX(${d.bytes('title')}) AS title, MAX(${d.bytes('url')}) AS url FROM ${t}
      WHERE query = ? AND country = ? AND lang = ? AND run_id = ? AND dedupe_key IS NOT NULL GROUP BY dedupe_key ORDER BY rank LIMIT ?`,
  /** A result's rank in a run (`?`: query, country, lang, the run, its dedupe key). */
  rankIn: (t: string) => `SELECT MIN(rank) FROM ${t} WHERE query = ? AND country = ? AND lang = ? AND run_id = ? AND dedupe_key = ?`,
  /**
   * The latest runs on record but abandoned ones, newest first (`?`: how many), with their summary where it is no longer
   * than `maxSummary`. Runs recorded in the same instant keep the order they were recorded in.
   */
  runs: (runs: string, d: Dialect, maxSummary: number) =>
    `SELECT run_id, pipeline, status, started_at, CASE WHEN length(summary) <= ${maxSummary} THEN summary END AS summary FROM ${runs}
      WHERE status <> 'abandoned' ORDER BY started_at DESC, ${d === POSTGRES ? 'created' : 'rowid'} DESC LIMIT ?`,
  /** The credits spent by each of `runs` runs, and how many of them are uncertain (`?`: the runs). */
  spend: (spend: string, d: Dialect, runs: number) =>
    `SELECT run_id, ${d.real('SUM(credits)')} AS credits, ${d.real(`SUM(CASE WHEN ${d.isTrue('uncertain')} THEN credits ELSE 0 END)`)} AS uncertain FROM ${spend}
        WHERE run_id IN (${Array.from({ length: runs }, () => '?').join(', ')}) GROUP BY run_id`,
  /** The latest day webdata_spend has spend on. */
  latestSpendDay: (view: string) => `SELECT MAX(day) AS day FROM ${view}`,
  /**
   * Credits by day, key and pipeline from webdata_spend, from a day on (`?`), with the key's allowance; the keys with
   * the most credits first, so that the panel's keys are those.
   */
  keySpendByDay: (view: string, d: Dialect) =>
    `SELECT day, key_fingerprint, key_label, pipeline, ${d.real('SUM(credits)')} AS credits, ${d.real('MAX(allowance_credits)')} AS allowance_credits,
        MAX(allowance_per) AS allowance_per, MAX(allowance_timezone) AS allowance_timezone, ${d.real('SUM(SUM(credits)) OVER (PARTITION BY key_fingerprint)')} AS key_total
      FROM ${view} WHERE day >= ? GROUP BY day, key_fingerprint, key_label, pipeline
      ORDER BY key_total DESC, ${d.bytes('key_fingerprint')}, ${d.bytes('key_label')}, ${d.bytes('day')}, ${d.bytes('pipeline')}`,
};
