import type Database from 'better-sqlite3';
import { trackedTable, type TrackedRow } from './series-tracked.ts';
import { sqliteTrackedStatements } from './statements.ts';

/** The tracked table beside a SQLite results table (series-tracked.ts), created when missing. */
export function prepareSqliteTracked(db: Database.Database, table: string): void {
  db.exec(sqliteTrackedStatements(table).create);
}

/** Writes, and takes back, a SQLite results table's tracked ranks; a table that has none (never tracked) is left alone. */
export function sqliteTracked(db: Database.Database, table: string) {
  const sql = sqliteTrackedStatements(table);
  const exists = () => db.prepare(sql.exists).get(trackedTable(table)) !== undefined;
  const recordAll = db.transaction((runId: string, rows: readonly TrackedRow[]) => {
    const record = db.prepare(sql.record);
    for (const r of rows) record.run(runId, r.query, r.country, r.lang, r.domain, r.rank, r.searched);
  });
  return {
    /** A slice of the run's tracked ranks, in one transaction. */
    record: (runId: string, rows: readonly TrackedRow[]) => void recordAll(runId, rows),
    /** In the caller's transaction, with the run's rows. */
    discard: (runId: string) => void (exists() && db.prepare(sql.discard).run(runId)),
    keepOnly: (runId: string) => void (exists() && db.prepare(sql.keepOnly).run(runId)),
  };
}

export type SqliteTracked = ReturnType<typeof sqliteTracked>;
