import type { RowInsert } from '../commits/page-writes.ts';
import { quoteIdentifier as q } from '../sql-identifier.ts';
import { sqlType, UPSERT_KEY } from './columns.ts';
import { postgresColumnType } from './postgres-columns.ts';
import { NOT_REACHED, OUTCOME_COLUMNS, outcomesTable } from './series-outcomes.ts';
import { TRACKED_COLUMNS, trackedTable } from './series-tracked.ts';

/*
 * Every statement the SQLite and PostgreSQL sinks send, by name, as pure functions of the schema, the table and its
 * columns (the pg-boss `plans.ts` way): a reader sees what a sink asks of its database in one place. The names are
 * given as they are and quoted here (sql-identifier.ts); values are always bound (`?` in SQLite, `$n` in PostgreSQL).
 * A page's rows themselves are written by the commit floor's statements (commits/statements.ts) from the parts made
 * here (`insert`, `conflict`).
 */

/** The columns an upsert updates on a row with the same key: all but the key and when, and by which run, it was first seen. */
function upsertUpdates(stored: readonly string[]): string {
  const updated = stored.filter((c) => !UPSERT_KEY.includes(c) && c !== 'first_seen' && c !== 'first_run_id');
  return updated.map((c) => `${q(c)} = excluded.${q(c)}`).join(', ');
}

/** A SQLite results table's statements (`table` and the columns as named, unquoted). */
export const sqliteSinkStatements = {
  /** The file's results schema (its `user_version`), read and set with better-sqlite3's `pragma`. */
  schemaVersion: 'user_version',
  setSchemaVersion: (version: number) => `user_version = ${version}`,
  /** A table's columns, in order (`?`: the table's name, as a value); none if there is no such table. */
  tableColumns: 'SELECT name FROM pragma_table_info(?)',
  /** A tag column added to a table that has rows already: empty for them. */
  addColumn: (table: string, column: string) => `ALTER TABLE ${q(table)} ADD COLUMN ${q(column)} TEXT`,
  /** The table, each column declared by the normalized item's schema (`sqlType`), or untyped. */
  createTable: (table: string, columns: readonly string[]) => `CREATE TABLE IF NOT EXISTS ${q(table)} (${columns.map((c) => `${q(c)} ${sqlType(c)}`.trim()).join(', ')})`,
  /** The series with its runs: (query, country, lang, run_id), those of them the table has. */
  seriesIndex: (table: string, columns: readonly string[]) => `CREATE INDEX IF NOT EXISTS ${q(`${table}_series`)} ON ${q(table)} (${columns.map(q).join(', ')})`,
  dedupeKeyIndex: (table: string) => `CREATE INDEX IF NOT EXISTS ${q(`${table}_dedupe_key`)} ON ${q(table)} (dedupe_key)`,
  /** Upsert's key, one row per (query, country, lang, dedupe_key). */
  upsertKeyIndex: (table: string) => `CREATE UNIQUE INDEX IF NOT EXISTS ${q(`${table}_upsert_key`)} ON ${q(table)} (${UPSERT_KEY.map(q).join(', ')})`,
  /**
   * A page's insert as parts (`RowInsert`: the commit floor adds the rows' placeholders): the table's `stored` columns,
   * and in upsert mode, the update of the row with the same key.
   */
  insert: (table: string, stored: readonly string[], upsert: boolean): RowInsert => ({
    into: `INSERT INTO ${q(table)} (${stored.map(q).join(', ')})`,
    width: stored.length,
    then: upsert ? ` ON CONFLICT (${UPSERT_KEY.map(q).join(', ')}) DO UPDATE SET ${upsertUpdates(stored)}` : '',
  }),
  /** The rows a run brought in, by `column` (`run_id`, or upsert's `first_run_id`; `?`: the run). */
  discardRun: (table: string, column: string) => `DELETE FROM ${q(table)} WHERE ${q(column)} = ?`,
  /** Every run's rows but one (`?`: the run kept). */
  keepOnlyRun: (table: string) => `DELETE FROM ${q(table)} WHERE run_id <> ?`,
};

/** Where a PostgreSQL sink keeps its checkpoints: a table in the results table's schema, quoted and qualified. */
export function postgresCheckpoints(schema: string): string {
  return `${q(schema)}.webdata_checkpoints`;
}

/** A PostgreSQL results table's name, quoted and qualified by its schema. */
export function postgresTable(schema: string, table: string): string {
  return `${q(schema)}.${q(table)}`;
}

/**
 * The upsert key as a table's unique index has it: a new table's takes the query's digest (a long query passes a
 * B-tree entry's 2,704 bytes), one made by an earlier webdata-etl the query itself (`indexDefinition` tells).
 */
export function upsertTarget(digest: boolean): string {
  return digest ? 'md5(query), country, lang, dedupe_key' : UPSERT_KEY.map(q).join(', ');
}

/** A PostgreSQL results table's statements (`schema`, `table` and the columns as named, unquoted). */
export const postgresSinkStatements = {
  /** Whether the schema is there (`$1`: its name). */
  schemaExists: 'SELECT 1 FROM pg_namespace WHERE nspname = $1',
  createSchema: (schema: string) => `CREATE SCHEMA IF NOT EXISTS ${q(schema)}`,
  /** A table's columns, in order (`$1`: the schema, `$2`: the table); none if there is no such table. */
  tableColumns: 'SELECT column_name AS name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position',
  /** A tag column added to a table that has rows already: empty for them. */
  addColumn: (schema: string, table: string, column: string) => `ALTER TABLE ${postgresTable(schema, table)} ADD COLUMN IF NOT EXISTS ${q(column)} text`,
  /** The table, each column typed by the normalized item's schema (`postgresColumnType`). */
  createTable: (schema: string, table: string, columns: readonly string[]) =>
    `CREATE TABLE IF NOT EXISTS ${postgresTable(schema, table)} (${columns.map((c) => `${q(c)} ${postgresColumnType(c)}`).join(', ')})`,
  /** A hash index has no size limit: lookups and joins by query, whatever its length. */
  seriesIndex: (schema: string, table: string) => `CREATE INDEX IF NOT EXISTS ${q(`${table}_series`)} ON ${postgresTable(schema, table)} USING hash (query)`,
  dedupeKeyIndex: (schema: string, table: string) => `CREATE INDEX IF NOT EXISTS ${q(`${table}_dedupe_key`)} ON ${postgresTable(schema, table)} (dedupe_key)`,
  /**
   * The series with its runs as a B-tree, which the views walk and look a series' rows up by (analytics/latest-runs.ts):
   * the query's digest (a B-tree entry holds 2,704 bytes, a query may be longer), country, lang, and the run by its
   * bytes, as the views order runs. The hash index above answers a query's rows alone, all its runs'.
   */
  seriesRunsIndex: (schema: string, table: string) =>
    `CREATE INDEX IF NOT EXISTS ${q(`${table}_series_runs`)} ON ${postgresTable(schema, table)} (md5(query), country, lang, run_id COLLATE "C")`,
  /** Whether a table (`$1`: its schema, `$2`: its name) has that index, whatever its name. */
  seriesRunsIndexed: `SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 AND indexdef LIKE '%USING btree (md5(query), country, lang, run_id COLLATE "C")'`,
  /** Whether a relation is there (`$1`: its quoted, qualified name, as a value: `postgresCheckpoints`). */
  relationExists: 'SELECT to_regclass($1) AS t',
  createCheckpoints: (schema: string) =>
    `CREATE TABLE IF NOT EXISTS ${postgresCheckpoints(schema)} (pipeline text NOT NULL, sink_id text NOT NULL, seq bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (pipeline, sink_id))`,
  /** The last page a table holds (`$1`: the pipeline, `$2`: the sink's id). */
  checkpoint: (schema: string) => `SELECT seq FROM ${postgresCheckpoints(schema)} WHERE pipeline = $1 AND sink_id = $2`,
  /** A sink's first checkpoint (`$1`: the pipeline, `$2`: the sink's id, `$3`: the page it starts at). */
  addCheckpoint: (schema: string) => `INSERT INTO ${postgresCheckpoints(schema)} (pipeline, sink_id, seq) VALUES ($1, $2, $3)`,
  /**
   * The upsert's unique index is tried within a savepoint (a table holding several rows per key refuses it), and so are
   * the series indexes (a role that does not own the table may not make them).
   */
  savepoint: 'SAVEPOINT unique_key',
  releaseSavepoint: 'RELEASE SAVEPOINT unique_key',
  rollbackSavepoint: 'ROLLBACK TO SAVEPOINT unique_key',
  upsertKeyIndex: (schema: string, table: string) => `CREATE UNIQUE INDEX IF NOT EXISTS ${q(`${table}_upsert_key`)} ON ${postgresTable(schema, table)} (${upsertTarget(true)})`,
  /** An index's definition (`$1`: its schema, `$2`: its name), to tell which upsert key a table has. */
  indexDefinition: 'SELECT indexdef AS def FROM pg_indexes WHERE schemaname = $1 AND indexname = $2',
  /**
   * A page's rows as parts (`PostgresRows` but for its values and checkpoint; the commit floor makes the statement): the
   * table, its `stored` columns and each one's array element type, and in upsert mode, the update of the row with the
   * same key (`target`: `upsertTarget`).
   */
  rows: (schema: string, table: string, stored: readonly string[], upsert: { target: string } | undefined) => ({
    table: postgresTable(schema, table),
    columns: stored.map(q).join(', '),
    types: stored.map((c) => postgresColumnType(c).replace(/ NOT NULL$/, '')),
    conflict: upsert ? ` ON CONFLICT (${upsert.target}) DO UPDATE SET ${upsertUpdates(stored)}` : '',
  }),
  /** The rows a run brought in, by `column` (`run_id`, or upsert's `first_run_id`; `$1`: the run). */
  discardRun: (schema: string, table: string, column: string) => `DELETE FROM ${postgresTable(schema, table)} WHERE ${q(column)} = $1`,
  /** Every run's rows but one (`$1`: the run kept). */
  keepOnlyRun: (schema: string, table: string) => `DELETE FROM ${postgresTable(schema, table)} WHERE run_id <> $1`,
  /**
   * A page's rows and checkpoint as a statement of the sink's own: the parts the commit floor made (`addRows`), the
   * last of them the statement and the others data-modifying CTEs before it (a page with no rows has none: no WITH).
   */
  ownPage: (parts: readonly string[]) => {
    const before = parts.slice(0, -1).map((sql, i) => `w_${i} AS (${sql})`);
    return `${before.length > 0 ? `WITH ${before.join(', ')} ` : ''}${parts.at(-1)}`;
  },
};

const COLUMNS = OUTCOME_COLUMNS.join(', ');

/**
 * How a later invocation's record of a series meets an earlier one's: a series that completed in a run stays complete
 * there (the run never pages it again: its state only moves forward), so a record read before it completed — by a
 * worker of a distributed run that left earlier but wrote later — never undoes it; an incomplete one takes the latest
 * reason. `greatest` is the dialect's two-argument maximum (SQLite's MAX, PostgreSQL's GREATEST); `row` names the row
 * recorded before (PostgreSQL finds a bare column name ambiguous there, beside `excluded`).
 */
function keepComplete(greatest: 'MAX' | 'GREATEST', row = ''): string {
  // Only a row that changes is written: every worker of a distributed run that finishes records the plan's outcomes,
  // and the second to the eighth would otherwise rewrite each row as it was (a row version each, at a million series).
  return `reason = CASE WHEN ${row}complete = 1 THEN ${row}reason ELSE excluded.reason END, complete = ${greatest}(${row}complete, excluded.complete)
    WHERE ${row}complete = 0 AND (excluded.complete <> 0 OR excluded.reason <> ${row}reason)`;
}

/** The statements of the outcomes table beside the SQLite results table `table` (series-outcomes.ts); values as `?`. */
export function sqliteOutcomeStatements(table: string) {
  const t = q(table);
  const o = q(outcomesTable(table));
  return {
    create: `CREATE TABLE IF NOT EXISTS ${o} (run_id TEXT NOT NULL, query TEXT NOT NULL, country TEXT NOT NULL, lang TEXT NOT NULL,
      complete INTEGER NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (query, country, lang, run_id))`,
    /**
     * The primary key's columns and what the views read of each row: `changes` and `rankings` walk the table a series
     * at a time for its last complete and last tried runs, from the index alone (a year of 1,000 series: `changes`
     * 0.58–0.69 → 0.31–0.34 s of CPU; docs/benchmarks.md#a-year-on-one-database). Made on a table made before it too.
     */
    index: `CREATE INDEX IF NOT EXISTS ${q(`${outcomesTable(table)}_read`)} ON ${o} (query, country, lang, run_id, complete, reason)`,
    /** Every run the table holds but the one opening now (which records its own), as complete (`?`: the reason, the run). */
    backfill: `INSERT OR IGNORE INTO ${o} (${COLUMNS}) SELECT DISTINCT run_id, query, country, lang, 1, ? FROM ${t} WHERE run_id IS NOT NULL AND run_id <> ?`,
    /**
     * One series' outcome in a run, recorded again by each invocation of it (`keepComplete`); a `not_reached` one only
     * where it is news: `@force` (1), or the series has a latest row before the run and it says otherwise (a series
     * no run has reached has none: docs/analytics.md#failed-and-unreached-series).
     */
    record: `INSERT INTO ${o} (${COLUMNS}) SELECT @run, @query, @country, @lang, @complete, @reason
      WHERE @force OR @reason <> '${NOT_REACHED}' OR (SELECT x.reason FROM ${o} x
        WHERE x.query = @query AND x.country = @country AND x.lang = @lang AND x.run_id < @run ORDER BY x.run_id DESC LIMIT 1) <> '${NOT_REACHED}'
      ON CONFLICT (query, country, lang, run_id) DO UPDATE SET ${keepComplete('MAX')}`,
    discard: `DELETE FROM ${o} WHERE run_id = ?`,
    /** Before `keepOnly`: the series whose latest row says not reached keep saying it in the run that stays (`?`). */
    carry: `INSERT OR IGNORE INTO ${o} (${COLUMNS}) SELECT ?, x.query, x.country, x.lang, 0, '${NOT_REACHED}' FROM ${o} x
      WHERE x.reason = '${NOT_REACHED}' AND NOT EXISTS (SELECT 1 FROM ${o} y WHERE y.query = x.query AND y.country = x.country AND y.lang = x.lang AND y.run_id > x.run_id)`,
    keepOnly: `DELETE FROM ${o} WHERE run_id <> ?`,
  };
}

/**
 * Whether a PostgreSQL outcomes table (`$1`: its schema, `$2`: its name) has the indexes the views walk
 * (`seriesRunsIndex` and `runsIndex` below): one row if so.
 */
export const OUTCOMES_INDEXED = `SELECT 1 WHERE EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND tablename = $2
    AND indexdef LIKE '%USING btree (md5(query), country, lang, run_id COLLATE "C")')
  AND EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 AND indexdef LIKE '%USING btree (run_id COLLATE "C")')`;

/**
 * The same beside a PostgreSQL results table, in its schema; values as `$n`. A B-tree entry holds 2,704 bytes at most
 * and a query may be longer: the key takes the query's digest, as a results table's upsert key does.
 */
export function postgresOutcomeStatements(schema: string, table: string) {
  const name = outcomesTable(table);
  const t = postgresTable(schema, table);
  const o = postgresTable(schema, name);
  const target = 'md5(query), country, lang, run_id';
  return {
    create: [
      `CREATE TABLE IF NOT EXISTS ${o} (run_id text NOT NULL, query text NOT NULL, country text NOT NULL, lang text NOT NULL, complete integer NOT NULL, reason text NOT NULL)`,
      `CREATE UNIQUE INDEX IF NOT EXISTS ${q(`${name}_key`)} ON ${o} (${target})`,
    ],
    /**
     * The series with their runs in the order the views compare runs (by their bytes), which the key's default collation
     * does not give: PostgreSQL's views walk it a series at a time for its latest, last complete and last tried runs
     * (analytics/postgres-outcomes.ts) rather than group the whole table (a year of 1,000 series: 365,000 rows;
     * docs/benchmarks.md#a-year-on-one-database). Made on a table made before it too, as a run opens it.
     */
    seriesRunsIndex: `CREATE INDEX IF NOT EXISTS ${q(`${name}_series`)} ON ${o} (md5(query), country, lang, run_id COLLATE "C")`,
    /** The runs by their bytes: the views walk the runs recorded (a seek each) to count those since a series' latest. */
    runsIndex: `CREATE INDEX IF NOT EXISTS ${q(`${name}_runs`)} ON ${o} (run_id COLLATE "C")`,
    /** Whether the table has both, whatever their names (`$1`: the schema, `$2`: the outcomes table). */
    indexed: OUTCOMES_INDEXED,
    backfill: `INSERT INTO ${o} (${COLUMNS}) SELECT DISTINCT run_id, query, country, lang, 1, $1 FROM ${t} WHERE run_id IS NOT NULL AND run_id <> $2 ON CONFLICT DO NOTHING`,
    /**
     * A slice of the plan's outcomes, one array per column (`$1`: the run); a `not_reached` one only where it is news
     * (`$7` and the slice's first, or the series has a latest row before the run and it says otherwise). Run ids compare
     * by their bytes, as the views compare them.
     */
    record: `INSERT INTO ${o} AS recorded (${COLUMNS})
      SELECT $1, n.query, n.country, n.lang, n.complete, n.reason
      FROM unnest($2::text[], $3::text[], $4::text[], $5::int[], $6::text[]) WITH ORDINALITY AS n(query, country, lang, complete, reason, i)
      WHERE ($7::boolean AND n.i = 1) OR n.reason <> '${NOT_REACHED}' OR (SELECT x.reason FROM ${o} x
        WHERE md5(x.query) = md5(n.query) AND x.query = n.query AND x.country = n.country AND x.lang = n.lang AND x.run_id COLLATE "C" < $1 COLLATE "C"
        ORDER BY x.run_id COLLATE "C" DESC LIMIT 1) <> '${NOT_REACHED}'
      ON CONFLICT (${target}) DO UPDATE SET ${keepComplete('GREATEST', 'recorded.')}`,
    discard: `DELETE FROM ${o} WHERE run_id = $1`,
    /** Before `keepOnly`: the series whose latest row says not reached keep saying it in the run that stays (`$1`). */
    carry: `INSERT INTO ${o} (${COLUMNS}) SELECT $1, x.query, x.country, x.lang, 0, '${NOT_REACHED}' FROM ${o} x
      WHERE x.reason = '${NOT_REACHED}' AND NOT EXISTS (SELECT 1 FROM ${o} y
        WHERE md5(y.query) = md5(x.query) AND y.query = x.query AND y.country = x.country AND y.lang = x.lang AND y.run_id COLLATE "C" > x.run_id COLLATE "C")
      ON CONFLICT DO NOTHING`,
    keepOnly: `DELETE FROM ${o} WHERE run_id <> $1`,
  };
}

const TRACKED = TRACKED_COLUMNS.join(', ');

/**
 * The statements of the tracked table beside the SQLite results table `table` (series-tracked.ts); values as `?`.
 * Each invocation of a run records its series again: what a resume found replaces what an earlier one had.
 */
export function sqliteTrackedStatements(table: string) {
  const k = q(trackedTable(table));
  return {
    create: `CREATE TABLE IF NOT EXISTS ${k} (run_id TEXT NOT NULL, query TEXT NOT NULL, country TEXT NOT NULL, lang TEXT NOT NULL,
      domain TEXT NOT NULL, rank INTEGER, searched INTEGER NOT NULL, PRIMARY KEY (query, country, lang, domain, run_id))`,
    exists: `SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`,
    record: `INSERT INTO ${k} (${TRACKED}) VALUES (?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (query, country, lang, domain, run_id) DO UPDATE SET rank = excluded.rank, searched = excluded.searched
      WHERE rank IS NOT excluded.rank OR searched IS NOT excluded.searched`,
    discard: `DELETE FROM ${k} WHERE run_id = ?`,
    keepOnly: `DELETE FROM ${k} WHERE run_id <> ?`,
  };
}

/** The same beside a PostgreSQL results table, in its schema; the key takes the query's digest (as the outcomes' does). */
export function postgresTrackedStatements(schema: string, table: string) {
  const name = trackedTable(table);
  const k = postgresTable(schema, name);
  const target = 'md5(query), country, lang, domain, run_id';
  return {
    create: [
      `CREATE TABLE IF NOT EXISTS ${k} (run_id text NOT NULL, query text NOT NULL, country text NOT NULL, lang text NOT NULL, domain text NOT NULL, rank integer, searched integer NOT NULL)`,
      `CREATE UNIQUE INDEX IF NOT EXISTS ${q(`${name}_key`)} ON ${k} (${target})`,
    ],
    /** A slice of the run's tracked ranks, one array per column (`$1`: the run). */
    record: `INSERT INTO ${k} AS recorded (${TRACKED}) SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[])
      ON CONFLICT (${target}) DO UPDATE SET rank = excluded.rank, searched = excluded.searched
      WHERE (recorded.rank, recorded.searched) IS DISTINCT FROM (excluded.rank, excluded.searched)`,
    discard: `DELETE FROM ${k} WHERE run_id = $1`,
    keepOnly: `DELETE FROM ${k} WHERE run_id <> $1`,
  };
}
