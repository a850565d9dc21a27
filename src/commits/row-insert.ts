import type Database from 'better-sqlite3';
import type { RowInsert } from './page-writes.ts';
import { sqliteRowsInsert } from './statements.ts';

/**
 * Rows per statement: one statement of 16 rows does the work of 16 with a sixteenth of the calls (each call binds,
 * steps and resets a statement); more rows per statement measured no better
 * (docs/benchmarks.md#figures-the-code-cites).
 */
const ROWS_PER_STATEMENT = 16;

/**
 * Inserts rows given as one flat array (fewer objects to build, to pass between threads and to bind): full statements of
 * `ROWS_PER_STATEMENT` rows, then one for the rest. Each row is still inserted in its order, so an upsert's later row
 * updates an earlier one with the same key as separate statements would. Statements are prepared once per shape.
 */
export function rowInserter(db: Database.Database): (insert: RowInsert, values: readonly unknown[]) => void {
  const statements = new Map<string, Database.Statement>();
  const statement = (insert: RowInsert, rows: number) => {
    const key = `${rows}\u0000${insert.into}\u0000${insert.then}`;
    let prepared = statements.get(key);
    if (!prepared) {
      prepared = db.prepare(sqliteRowsInsert(insert, rows));
      statements.set(key, prepared);
    }
    return prepared;
  };
  return (insert, values) => {
    const { width } = insert;
    if (values.length % width !== 0) throw new Error(`${values.length} values are not whole rows of ${width}`);
    const full = ROWS_PER_STATEMENT * width;
    let at = 0;
    for (; at + full <= values.length; at += full) statement(insert, ROWS_PER_STATEMENT).run(values.slice(at, at + full));
    if (at < values.length) statement(insert, (values.length - at) / width).run(values.slice(at));
  };
}
