import type { PostgresRows, RowInsert } from './page-writes.ts';

/*
 * The statements a page's rows are written with, wherever its transaction runs (the pg-boss `plans.ts` way: pure
 * functions of what they write, returning SQL). The names in them come quoted in the data (a sink quotes its table and
 * columns with sql-identifier.ts when it makes its `RowInsert` or `PostgresRows`); every value is a bound parameter.
 * Like the rest of this floor, this module imports only types, so the commit thread loads it without the sinks.
 */

/** SQLite: `rows` rows of `insert` in one statement, `?` for each of their values, in order. */
export function sqliteRowsInsert(insert: RowInsert, rows: number): string {
  const row = `(${Array.from({ length: insert.width }, () => '?').join(', ')})`;
  return `${insert.into} VALUES ${Array.from({ length: rows }, () => row).join(', ')}${insert.then}`;
}

/**
 * PostgreSQL: a page's rows as one INSERT of its arrays unnested (`arrays`: each column's placeholder, cast to its
 * array type), as `u(c0, c1, …)`, only where `where` holds (the statement's guard, and which keys it claimed).
 */
export function postgresRowsInsert(rows: PostgresRows, arrays: readonly string[], where: string): string {
  const names = arrays.map((_, i) => `c${i}`).join(', ');
  return `INSERT INTO ${rows.table} (${rows.columns}) SELECT * FROM unnest(${arrays.join(', ')}) AS u(${names}) WHERE true${where}${rows.conflict}`;
}

/** PostgreSQL: a page's rows written only where their key column (`u.c<key>`) is NULL or among the keys `claimed`. */
export function claimedKeys(key: number, claimed: string): string {
  return ` AND (u.c${key} IS NULL OR u.c${key} IN ${claimed})`;
}

/** PostgreSQL: the sink's checkpoint moved to `seq` (SQL), for its `pipeline` and `sinkId` (placeholders), where `where` holds. */
export function postgresCheckpointUpdate(rows: PostgresRows, seq: string, pipeline: string, sinkId: string, where: string): string {
  return `UPDATE ${rows.checkpoint.table} SET seq = ${seq}, updated_at = now() WHERE pipeline = ${pipeline} AND sink_id = ${sinkId}${where}`;
}
