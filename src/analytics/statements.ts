import { quoteIdentifier } from '../sql-identifier.ts';

/*
 * Every statement analytics sends, by name, as pure SQL (the pg-boss `plans.ts` way), but for two that already are:
 * the views' bodies (views.ts: `resultsViewsSql`, `spendViewSql`) and the filters' WHERE clause (filter.ts:
 * `filterClause`). Names that vary (views, tables, schemas, columns) are quoted by sql-identifier.ts, as the callers
 * pass them or here; values are always bound (`?` in SQLite and in a Reader's queries, `$n` in PostgreSQL).
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
};

/** What a Reader asks of a PostgreSQL database. */
export const postgresReaderStatements = {
  /** Whether the database answers at all, before anything else is asked. */
  ping: 'SELECT 1',
  /** Whether a table or view is there (`$1`: its qualified name, quoted, as a value). */
  relationExists: `SELECT to_regclass($1) IS NOT NULL AS found`,
  /** A table's columns and their types (`$1`: the schema, `$2`: the table). */
  tableColumns: `SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
  /** Rows read behind a cursor, `rows` at a time, in a read-only transaction. */
  begin: 'BEGIN READ ONLY',
  declareCursor: (select: string) => `DECLARE reading NO SCROLL CURSOR FOR ${select}`,
  fetch: (rows: number) => `FETCH ${rows} FROM reading`,
  commit: 'COMMIT',
  // PostgreSQL keeps no insertion order: the items come by run, then as they were served.
  insertionOrder: `run_id COLLATE "C", query COLLATE "C", country COLLATE "C", lang COLLATE "C", page, position`,
};
