import { NOT_REACHED, SKIPPED } from '../sinks/series-outcomes.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import { type Dialect, POSTGRES } from './dialect.ts';
import { latestRunsCtes } from './latest-runs.ts';
import { postgresChangesEnd } from './postgres-changes.ts';
import { postgresChangesStart, postgresRankingsLatest } from './postgres-outcomes.ts';
import { overlapSql } from './overlap-sql.ts';
import { changesTags, rankingsTags } from './view-tags.ts';

/*
 * Every statement analytics sends, by name, as pure SQL (the pg-boss `plans.ts` way): the views' bodies
 * (`resultsViewsSql`, `spendViewSql`), re-creating them, what a Reader asks, a report's rows; but for the filters' WHERE
 * clause, which filter.ts builds (`filterClause`). Names that vary (views, tables, schemas, columns) are quoted by
 * sql-identifier.ts, as the callers pass them or here; values are always bound (`?` in SQLite and in a Reader's
 * queries, `$n` in PostgreSQL).
 */

/** Re-creating a view, in either database; `view` is its name quoted (and qualified in PostgreSQL). */
export const viewStatements = {
  drop: (view: string) => `DROP VIEW IF EXISTS ${view}`,
  create: (view: string, select: string) => `CREATE VIEW ${view} AS ${select}`,
  createOrReplace: (view: string, select: string) => `CREATE OR REPLACE VIEW ${view} AS ${select}`,
  /** PostgreSQL: views re-created one transaction at a time; `$1` is the lock's name. */
  lock: `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
};

/**
 * PostgreSQL: the views of a schema by name (`$1` the schema, `$2` the names) with the version of their rule (its row's
 * xmin: a new one with every CREATE OR REPLACE) and their comment, which webdata-etl marks with what it made them from
 * (`view-marks.ts`). Catalog rows alone: no view is locked.
 */
export const viewMarkStatements = {
  read: `SELECT c.relname AS name, r.xmin::text AS version, d.description AS note
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_rewrite r ON r.ev_class = c.oid AND r.rulename = '_RETURN'
    LEFT JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0
    WHERE n.nspname = $1 AND c.relname = ANY($2::text[]) AND c.relkind = 'v'`,
  /** COMMENT takes no parameter: the mark is inlined, and made only of the words and hex digits checked here. */
  mark: (view: string, mark: string) => {
    if (!/^[a-z0-9 -]+$/.test(mark)) throw new Error(`a view's mark holds only words and hex digits, not ${JSON.stringify(mark)}`);
    return `COMMENT ON VIEW ${view} IS '${mark}'`;
  },
};

/**
 * A report's rows: its `columns` (names, quoted here) from `relation` (quoted, and qualified in PostgreSQL), filtered
 * by `where` (a `filterClause`, its values bound), in `order` (see `orderByBytes`). Columns in `absent` (a view made by
 * an older webdata-etl, which had fewer) are NULL.
 */
export function reportSelect(columns: readonly string[], relation: string, where: string, order: string, absent: ReadonlySet<string> = new Set()): string {
  const list = columns.map((c) => (absent.has(c) ? `NULL AS ${quoteIdentifier(c)}` : quoteIdentifier(c)));
  return `SELECT ${list.join(', ')} FROM ${relation} ${where} ORDER BY ${order}`;
}

/**
 * An ORDER BY whose text columns compare by bytes, so that both databases give the same order: `order` is the
 * report's (`name [DESC], …`), `isText` says which columns hold text, `bytes` is the dialect's.
 */
export function orderByBytes(order: string, isText: (column: string) => boolean, bytes: (expression: string) => string): string {
  return order
    .split(', ')
    .map((term) => {
      const [column = '', direction = ''] = term.split(' ');
      return `${isText(column) ? bytes(quoteIdentifier(column)) : quoteIdentifier(column)} ${direction}`.trim();
    })
    .join(', ');
}

/** What a Reader asks of a SQLite file. */
export const sqliteReaderStatements = {
  /** Whether a table or view is there (`?`: its name, as a value). */
  relationExists: `SELECT 1 FROM sqlite_master WHERE name = ? AND type IN ('table', 'view')`,
  /** A table's columns and their declared types (`?`: the table's name). */
  tableColumns: 'SELECT name, type FROM pragma_table_info(?)',
  /** The order rows were written in. */
  insertionOrder: 'rowid',
  /**
   * Whether a table (`?`) has a whole index whose first columns are its series and run, in that order, compared by
   * bytes (latest-runs.ts walks it).
   */
  seriesIndexed: `SELECT 1 FROM pragma_index_list(?) l WHERE l.partial = 0 AND (SELECT count(*) FROM pragma_index_xinfo(l.name) c
    WHERE c.key = 1 AND c.coll = 'BINARY' AND c.desc = 0 AND ((c.seqno = 0 AND c.name = 'query') OR (c.seqno = 1 AND c.name = 'country')
      OR (c.seqno = 2 AND c.name = 'lang') OR (c.seqno = 3 AND c.name = 'run_id'))) = 4`,
};

/** What a Reader asks of a PostgreSQL database. */
export const postgresReaderStatements = {
  /** Whether the database answers at all, before anything else is asked. */
  ping: 'SELECT 1',
  /** Whether a table or view is there (`$1`: its qualified name, quoted, as a value). */
  relationExists: `SELECT to_regclass($1) IS NOT NULL AS found`,
  /** A table's columns and their types (`$1`: the schema, `$2`: the table). */
  tableColumns: `SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
  /** The columns of several tables at once (`$1`: the schema, `$2`: the tables' names), table by table. */
  tablesColumns: `SELECT table_name AS relation, column_name AS name FROM information_schema.columns WHERE table_schema = $1 AND table_name = ANY($2::text[]) ORDER BY table_name, ordinal_position`,
  /** Rows read behind a cursor, `rows` at a time, in a read-only transaction. */
  begin: 'BEGIN READ ONLY',
  declareCursor: (select: string) => `DECLARE reading NO SCROLL CURSOR FOR ${select}`,
  fetch: (rows: number) => `FETCH ${rows} FROM reading`,
  commit: 'COMMIT',
  // PostgreSQL keeps no insertion order: the items come by run, then as they were served.
  insertionOrder: `run_id COLLATE "C", query COLLATE "C", country COLLATE "C", lang COLLATE "C", page, position`,
};

/** The analytics views over a results table, by report name. */
export type ResultsView = 'rankings' | 'domains' | 'overlap' | 'changes';

/** The URLs compared between countries by the overlap view: the top N of each. */
export const OVERLAP_TOP = 10;

/**
 * Which run of each (query, country, lang) the views read. `complete`: its latest complete run, by the outcomes table
 * (`sinks/series-outcomes.ts`), so that a series that failed, ran out of budget or was stopped part way is shown as it
 * last was whole; a series with no complete run yet, by its latest run. `latest`: its latest run, for a table whose
 * rows' run is the one that last saw them (upsert), where runs are not history.
 */
export type RunsRead = 'complete' | 'latest';

/**
 * The outcomes table `o` (quoted, qualified if need be) as every reader reads it, in its columns (`run_id, query,
 * country, lang, complete, reason`, `run_id` compared by its bytes): the rows recorded, and `not_reached` for a series
 * in each run recorded that has no row of it where its latest row before that run says `not_reached`. A run's close
 * writes a series not reached only where that is news (sinks/statements.ts), so that a plan of a million series mostly
 * not reached writes what changed, not a row per series; a series taken out of the plan has no row, and reads as none
 * (docs/analytics.md#failed-and-unreached-series).
 */
export function outcomesReadSql(o: string, d: Dialect): string {
  return `
        SELECT ${d.bytes('run_id')} AS run_id, query, country, lang, complete, reason FROM ${o}
        UNION ALL
        SELECT r.run_id, k.query, k.country, k.lang, 0, '${NOT_REACHED}'
        FROM (SELECT DISTINCT query, country, lang FROM ${o}) k CROSS JOIN (SELECT DISTINCT ${d.bytes('run_id')} AS run_id FROM ${o}) r
        WHERE NOT EXISTS (SELECT 1 FROM ${o} x WHERE x.query = k.query AND x.country = k.country AND x.lang = k.lang AND x.run_id = r.run_id)
          AND ${latestBefore(o, d, 'k', 'r.run_id')} = '${NOT_REACHED}'`;
}

/** The reason of the latest row of the series `k` names before the run `run` (compared by bytes): NULL if none. */
function latestBefore(o: string, d: Dialect, k: string, run: string): string {
  return `(SELECT x.reason FROM ${o} x WHERE x.query = ${k}.query AND x.country = ${k}.country AND x.lang = ${k}.lang AND ${d.bytes('x.run_id')} < ${run}
            ORDER BY ${d.bytes('x.run_id')} DESC LIMIT 1)`;
}

/**
 * `tried`: each series' latest run that did not skip it, by the outcomes as `outcomesReadSql` reads them, without
 * putting every missing row back: its latest row that is not a skip; but where that is its latest row of all and says
 * `not_reached`, the latest run recorded (it has not been reached since, or it would have a row).
 */
function triedSql(o: string, d: Dialect): string {
  return `tried_rows AS (
        SELECT query, country, lang, MAX(CASE WHEN reason <> '${SKIPPED}' THEN ${d.bytes('run_id')} END) AS run_id, MAX(${d.bytes('run_id')}) AS last_row
        FROM ${o} GROUP BY query, country, lang),
      tried AS (
        SELECT y.query, y.country, y.lang,
          CASE WHEN y.run_id = y.last_row AND EXISTS (SELECT 1 FROM ${o} x WHERE ${d.sameQuery('x', 'y')} AND x.country = y.country AND x.lang = y.lang
              AND x.run_id = y.run_id AND x.reason = '${NOT_REACHED}')
            THEN (SELECT MAX(${d.bytes('run_id')}) FROM ${o}) ELSE y.run_id END AS run_id
        FROM tried_rows y WHERE y.run_id IS NOT NULL)`;
}

/**
 * `changes`' CTEs up to `compared` (`tried`, `done`, `last_done`, `failed`, `compared`) as groupings of the outcomes
 * table `o`: SQLite's, and PostgreSQL's where `o` has no indexes to walk (postgres-outcomes.ts walks them).
 */
function changesStartSql(o: string, d: Dialect): string {
  const series = (a: string, b: string) => `${a}.query = ${b}.query AND ${a}.country = ${b}.country AND ${a}.lang = ${b}.lang`;
  return `${triedSql(o, d)},
      done AS (SELECT query, country, lang, ${d.bytes('run_id')} AS run_id FROM ${o} WHERE complete = 1),
      last_done AS (SELECT query, country, lang, MAX(run_id) AS run_id FROM done GROUP BY query, country, lang),
      failed AS (
        SELECT y.query, y.country, y.lang, y.run_id, COALESCE(f.reason, '${NOT_REACHED}') AS reason
        FROM tried y LEFT JOIN ${o} f ON ${series('f', 'y')} AND ${d.bytes('f.run_id')} = y.run_id WHERE COALESCE(f.complete, 0) = 0),
      compared AS (
        SELECT c.query, c.country, c.lang, c.run_id, MAX(p.run_id) AS previous_run_id
        FROM last_done c JOIN tried y ON ${series('y', 'c')} AND y.run_id = c.run_id
        LEFT JOIN done p ON ${series('p', 'c')} AND p.run_id < c.run_id
        GROUP BY c.query, c.country, c.lang, c.run_id)`;
}

/**
 * The views over a results table `t` and its outcomes table `o` (both quoted, qualified if need be), named by `name`,
 * in the order they depend on each other. Plain SQL, readable by any SQLite tool (no FULL JOIN, which older ones
 * lack). Run ids sort by time, so the latest run is the greatest. `tags`: the table's tag columns (`tagColumnsOf`),
 * which `rankings` and `changes` carry after their own. `seriesIndexed`: `t` has its series index (query, country, lang,
 * run_id), which the views then walk rather than read the whole table (latest-runs.ts); `outcomesIndexed`: `o` has
 * PostgreSQL's series and runs indexes, which its views then walk likewise (postgres-outcomes.ts).
 */
export function resultsViewsSql(
  t: string,
  o: string,
  name: (view: ResultsView) => string,
  d: Dialect,
  runs: RunsRead = 'complete',
  tags: readonly string[] = [],
  seriesIndexed = false,
  outcomesIndexed = false,
): Record<ResultsView, string> {
  // Each series' latest run in the table: `latest` where runs are not history, else `seen` (latest-runs.ts).
  const seen = latestRunsCtes(t, runs === 'latest' ? 'latest' : 'seen', d, seriesIndexed);
  const series = (a: string, b: string) => `${a}.query = ${b}.query AND ${a}.country = ${b}.country AND ${a}.lang = ${b}.lang`;
  // A series' rows in the results table (as `r`) at the run `run` of another relation's series `a`, as the table's B-tree
  // index (series and run, the run by its bytes) looks them up: PostgreSQL's by the query's digest (`sameQuery`).
  const rowsAt = (a: string, run: string) => `${d.sameQuery(a, 'r')} AND ${a}.country = r.country AND ${a}.lang = r.lang AND ${d.bytes('r.run_id')} = ${run}`;
  const postgres = d === POSTGRES;
  // PostgreSQL's outcomes with their indexes: each series' runs, and the runs, looked up along them (postgres-outcomes.ts).
  const walkOutcomes = postgres && outcomesIndexed;
  const q = quoteIdentifier;
  // A series' tags are its query's (one value in a run): taken whole with its rows, as the greatest of them.
  const tagged = changesTags(tags);
  const tagsOf = (rows: string) => tagged.map((tag) => `, MAX(${d.bytes(`${rows}.${q(tag.column)}`)}) AS ${q(tag.column)}`).join('');
  // A series' rows in a run, one per dedupe key: its best rank there, and a URL and title to show. Read by the
  // (series, run) pairs `compared` names, an IN list rather than a join, so that the database looks each pair up by the
  // table's series index and never scans the table (a join let SQLite scan every run's rows for the previous run's:
  // docs/benchmarks.md#a-year-on-one-database).
  const rowsOf = (run: 'run_id' | 'previous_run_id') => `
        SELECT r.query, r.country, r.lang, r.dedupe_key, MIN(r.rank) AS rank, MAX(${d.bytes('r.url')}) AS url, MAX(${d.bytes('r.title')}) AS title${tagsOf('r')}
        FROM ${t} r
        WHERE (r.query, r.country, r.lang, r.run_id) IN (SELECT query, country, lang, ${run} FROM compared) AND r.dedupe_key IS NOT NULL
        GROUP BY r.query, r.country, r.lang, r.dedupe_key`;
  // A failed series' tags: those of its rows in the run that failed, else in its last complete run.
  const failedTags = tagged.length
    ? `,
      failed_tags AS (
        SELECT r.query, r.country, r.lang, r.run_id${tagsOf('r')}
        FROM ${t} r JOIN failed f ON ${series('f', 'r')} LEFT JOIN last_done c ON ${series('c', 'f')}
        WHERE r.run_id = f.run_id OR r.run_id = c.run_id GROUP BY r.query, r.country, r.lang, r.run_id)`
    : '';
  const tagCells = (from: (column: string) => string) => tagged.map((tag) => `, ${from(q(tag.column))} AS ${q(tag.as)}`).join('');
  return {
    // The rows of the run each (query, country, lang) is read at (`RunsRead`), best rank first, and `age_runs`: the runs
    // recorded in the outcomes table since that one (0: the latest; a series a refresh plan skipped, or that failed since).
    rankings: `
      WITH ${seen.recursive || walkOutcomes ? 'RECURSIVE ' : ''}${
        walkOutcomes
          ? `${seen.sql},
      ${postgresRankingsLatest(o, runs)}`
          : `${
              runs === 'latest'
                ? seen.sql
                : `${seen.sql},
      complete AS (SELECT query, country, lang, MAX(${d.bytes('run_id')}) AS run_id FROM ${o} WHERE complete = 1 GROUP BY query, country, lang),
      latest AS (SELECT s.query, s.country, s.lang, COALESCE(c.run_id, s.run_id) AS run_id FROM seen s LEFT JOIN complete c ON ${series('c', 's')})`
            },
      runs AS (SELECT DISTINCT ${d.bytes('run_id')} AS run_id FROM ${o}),
      aged AS (
        SELECT l.query, l.country, l.lang, l.run_id, ${d.int('COUNT(u.run_id)')} AS age_runs
        FROM latest l LEFT JOIN runs u ON u.run_id > l.run_id GROUP BY l.query, l.country, l.lang, l.run_id)`
      }
      SELECT r.query, r.country, r.lang, r.rank, r.title, r.url, r.domain, r.page, r.position, r.dedupe_key, r.run_id, r.fetched_at, latest.age_runs${rankingsTags(tags)
        .map((tag) => `, r.${q(tag.column)}${tag.as === tag.column ? '' : ` AS ${q(tag.as)}`}`)
        .join('')}
      FROM ${
        postgres
          ? // A lookup of each series' rows (OFFSET 0: not flattened into a join, which PostgreSQL, taking the walk for a
            // million series, made a sort of the whole table).
            `aged latest CROSS JOIN LATERAL (SELECT * FROM ${t} r WHERE ${rowsAt('latest', 'latest.run_id')} OFFSET 0) r`
          : `${t} r JOIN aged latest ON ${series('latest', 'r')} AND latest.run_id = r.run_id`
      }`,
    // Who dominates a query in a country: results, best and average rank, share of the latest results.
    domains: `
      SELECT query, country, domain, ${d.int('COUNT(*)')} AS results, MIN(rank) AS best_rank, ${d.real('ROUND(AVG(rank), 2)')} AS average_rank,
        ${d.real('ROUND(1.0 * COUNT(*) / SUM(COUNT(*)) OVER (PARTITION BY query, country), 4)')} AS share
      FROM ${name('rankings')} WHERE domain IS NOT NULL
      GROUP BY query, country, domain`,
    // How alike two countries' top ${OVERLAP_TOP} are for a query: Jaccard similarity of their URL sets (overlap-sql.ts).
    overlap: overlapSql(name('rankings'), OVERLAP_TOP, d),
    // What changed in each (query, country, lang) between its last two complete runs: new, lost, up, down
    // (rank_delta > 0 is up), same. A series whose latest run did not complete (failed, budget, stopped, not reached)
    // is not compared: one row says so, `failed`, with why and the complete run it would be compared with
    // (docs/analytics.md#failed-and-unreached-series); a run with no row of a series did not reach it (`outcomesReadSql`).
    // A run that skipped a series (`SKIPPED`) is passed over: the series keeps the comparison of its last two fetched
    // runs, and is compared with the last when it is fetched again.
    changes: `
      WITH ${
        walkOutcomes
          ? `RECURSIVE ${postgresChangesStart(o)}`
          : changesStartSql(o, d)
      },
      ${postgres ? postgresChangesEnd(t, rowsAt, tagsOf, tagCells, failedTags) : `cur AS (${rowsOf('run_id')}),
      prev AS (${rowsOf('previous_run_id')})${failedTags}
      SELECT c.query, c.country, c.lang, c.dedupe_key, c.url, c.title, p.rank AS previous_rank, c.rank AS current_rank,
        p.rank - c.rank AS rank_delta,
        CASE WHEN p.rank IS NULL THEN 'new' WHEN c.rank < p.rank THEN 'up' WHEN c.rank > p.rank THEN 'down' ELSE 'same' END AS change,
        x.run_id, x.previous_run_id, NULL AS reason${tagCells((column) => `c.${column}`)}
      FROM cur c JOIN compared x ON ${series('x', 'c')}
      LEFT JOIN prev p ON ${series('p', 'c')} AND p.dedupe_key = c.dedupe_key
      UNION ALL
      SELECT p.query, p.country, p.lang, p.dedupe_key, p.url, p.title, p.rank, NULL, NULL, 'lost', x.run_id, x.previous_run_id, NULL${tagCells((column) => `p.${column}`)}
      FROM prev p JOIN compared x ON ${series('x', 'p')}
      LEFT JOIN cur c ON ${series('c', 'p')} AND c.dedupe_key = p.dedupe_key
      WHERE c.dedupe_key IS NULL`}
      UNION ALL
      SELECT f.query, f.country, f.lang, NULL, NULL, NULL, NULL, NULL, NULL, 'failed', f.run_id, c.run_id, f.reason${tagCells((column) => `COALESCE(ft.${column}, ct.${column})`)}
      FROM failed f LEFT JOIN last_done c ON ${series('c', 'f')}${
        tagged.length ? `
      LEFT JOIN failed_tags ft ON ${series('ft', 'f')} AND ft.run_id = f.run_id LEFT JOIN failed_tags ct ON ${series('ct', 'f')} AND ct.run_id = c.run_id` : ''
      }`,
  };
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

/**
 * Where the credits went (docs/credits.md#where-the-credits-went): the ledger's `spend` by day, key, pipeline and run,
 * with the key's allowance (`key_allowances`, by its fingerprint) and, for the allowance's period the day is in, what
 * the key spent in it (every pipeline's), what runs at work hold of it now (`key_holds`, those whose holder still
 * renews them) and what is left. The day is the one written with the row (`spend.day`: on the clocks of the key's
 * allowance, else UTC's), or UTC's for a row written before it was; the period, the one the row's credits were held in,
 * else the allowance's day or month that day is in. A row's pipeline is its run's where the ledger has none (older rows).
 * `prefix`: the state's schema and a dot in PostgreSQL, '' in SQLite.
 */
export function keySpendViewSql(prefix: string, d: Dialect): string {
  const postgres = d === POSTGRES;
  const utcDay = postgres ? `to_char(s.at AT TIME ZONE 'UTC', 'YYYY-MM-DD')` : 'date(s.at)';
  // A hold stands until its holder stops renewing it: the store's clock in ms (SQLite), a time (PostgreSQL).
  const standing = postgres ? 'expires_at > now()' : `expires_at > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;
  const withAllowance = (expression: string) => `CASE WHEN a.fingerprint IS NOT NULL THEN ${expression} END`;
  const left = `a.credits - COALESCE(sp.credits, 0) - COALESCE(h.credits, 0)`;
  return `
      WITH ledger AS (
        SELECT COALESCE(s.day, ${utcDay}) AS day, s.key_fingerprint, s.key_label, COALESCE(s.pipeline, r.pipeline) AS pipeline, s.run_id, s.status,
          s.credits, s.uncertain, COALESCE(s.period, CASE a.per WHEN 'day' THEN COALESCE(s.day, ${utcDay}) WHEN 'month' THEN substr(COALESCE(s.day, ${utcDay}), 1, 7) END) AS period
        FROM ${prefix}spend s LEFT JOIN ${prefix}runs r ON r.run_id = s.run_id LEFT JOIN ${prefix}key_allowances a ON a.fingerprint = s.key_fingerprint),
      by_day AS (
        SELECT day, key_fingerprint, key_label, pipeline, run_id, period, COUNT(*) AS requests, SUM(CASE WHEN status LIKE '2__' THEN 1 ELSE 0 END) AS answered,
          SUM(credits) AS credits, SUM(CASE WHEN ${d.isTrue('uncertain')} THEN credits ELSE 0 END) AS uncertain_credits
        FROM ledger GROUP BY day, key_fingerprint, key_label, pipeline, run_id, period),
      spent AS (SELECT key_fingerprint, period, SUM(credits) AS credits FROM ${prefix}spend WHERE period IS NOT NULL GROUP BY key_fingerprint, period),
      held AS (SELECT fingerprint, period, SUM(credits) AS credits FROM ${prefix}key_holds WHERE ${standing} GROUP BY fingerprint, period)
      SELECT b.day, b.key_label, b.key_fingerprint, b.pipeline, b.run_id, ${d.int('b.requests')} AS requests, ${d.int('b.answered')} AS answered,
        ${d.real('b.credits')} AS credits, ${d.real('b.uncertain_credits')} AS uncertain_credits,
        ${d.real('a.credits')} AS allowance_credits, a.per AS allowance_per, a.timezone AS allowance_timezone, ${withAllowance('b.period')} AS period,
        ${withAllowance(d.real('COALESCE(sp.credits, 0)'))} AS period_spent, ${withAllowance(d.real('COALESCE(h.credits, 0)'))} AS period_held,
        ${withAllowance(d.real(`CASE WHEN ${left} > 0 THEN ${left} ELSE 0 END`))} AS period_left
      FROM by_day b LEFT JOIN ${prefix}key_allowances a ON a.fingerprint = b.key_fingerprint
      LEFT JOIN spent sp ON sp.key_fingerprint = b.key_fingerprint AND sp.period = b.period
      LEFT JOIN held h ON h.fingerprint = b.key_fingerprint AND h.period = b.period`;
}

/** What is read of keys' allowances (key-allowances.ts); `?` bound, as a Reader takes them. */
export const keyAllowanceStatements = {
  /** Every recorded allowance. */
  recorded: (allowances: string) => `SELECT fingerprint, label, pipeline, credits, per, timezone FROM ${allowances}`,
  /** The secret keys' fingerprints are taken under, from the state's meta table. */
  keySecret: (meta: string) => `SELECT value FROM ${meta} WHERE key = 'key_secret'`,
  /**
   * What a key's period took: spent (the ledger, every pipeline's) and held (the holds standing at the instant given,
   * in ms since the epoch). `?`: the fingerprint and the period, twice, then the instant.
   */
  periodUse: (spend: string, holds: string, d: Dialect) =>
    `SELECT (SELECT ${d.real('COALESCE(SUM(credits), 0)')} FROM ${spend} WHERE key_fingerprint = ? AND period = ?) AS spent,
      (SELECT ${d.real('COALESCE(SUM(credits), 0)')} FROM ${holds} WHERE fingerprint = ? AND period = ? AND expires_at > ${d === POSTGRES ? 'to_timestamp(CAST(? AS double precision) / 1000)' : '?'}) AS held`,
};

/**
 * `report_tracked`: each tracked domain's best rank per series and run, from the tracked table `k` (quoted, qualified
 * if need be; sinks/series-tracked.ts), with `position` saying it in words: the rank, or "not found within N" (the
 * ranks the run searched). Every run the table holds, a series fetched in part included (its `searched` says how far).
 */
export function trackedViewSql(k: string, d: Dialect): string {
  return `
      SELECT run_id, query, country, lang, domain, rank, searched, ${d.int('CASE WHEN rank IS NULL THEN 0 ELSE 1 END')} AS found,
        CASE WHEN rank IS NULL THEN 'not found within ' || CAST(searched AS TEXT) ELSE CAST(rank AS TEXT) END AS position
      FROM ${k}`;
}

/**
 * `report_tracked_latest`: each tracked domain of each series at its latest run in the tracked table `k`, the ranks
 * `report_tracked` has for it there, and `age_runs`, the runs recorded in `runs` (the outcomes table, else `k`: both
 * quoted) since then — 0 where the latest run fetched it, 3 where the three runs since skipped it
 * (docs/analytics.md#skipped-series). One row per series and domain, so that "where is it now, and how old is that"
 * is one read, whatever runs skipped the series.
 */
export function trackedLatestViewSql(k: string, runs: string, d: Dialect): string {
  const same = (a: string, b: string) => `${a}.query = ${b}.query AND ${a}.country = ${b}.country AND ${a}.lang = ${b}.lang AND ${a}.domain = ${b}.domain`;
  return `
      WITH latest AS (SELECT query, country, lang, domain, MAX(${d.bytes('run_id')}) AS run_id FROM ${k} GROUP BY query, country, lang, domain),
      runs AS (SELECT DISTINCT ${d.bytes('run_id')} AS run_id FROM ${runs}),
      aged AS (
        SELECT l.query, l.country, l.lang, l.domain, l.run_id, ${d.int('COUNT(u.run_id)')} AS age_runs
        FROM latest l LEFT JOIN runs u ON u.run_id > l.run_id GROUP BY l.query, l.country, l.lang, l.domain, l.run_id)
      SELECT t.query, t.country, t.lang, t.domain, t.rank, t.searched, ${d.int('CASE WHEN t.rank IS NULL THEN 0 ELSE 1 END')} AS found,
        CASE WHEN t.rank IS NULL THEN 'not found within ' || CAST(t.searched AS TEXT) ELSE CAST(t.rank AS TEXT) END AS position,
        t.run_id, a.age_runs
      FROM ${k} t JOIN aged a ON ${same('a', 't')} AND a.run_id = t.run_id`;
}
