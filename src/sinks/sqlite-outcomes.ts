import type Database from 'better-sqlite3';
import { quoteIdentifier as q } from '../sql-identifier.ts';
import { checkOutcomeColumns, outcomesTable, type SeriesOutcome, sqliteOutcomeStatements, UNRECORDED } from './series-outcomes.ts';

/**
 * The outcomes table beside a SQLite results table (`series-outcomes.ts`), created when missing. Created beside a
 * table that already holds runs (one written before outcomes were recorded), it records each of them as complete
 * (`unrecorded`), but `opening`, the run being opened now, which records its own when it closes.
 */
export function prepareSqliteOutcomes(db: Database.Database, table: string, opening = ''): void {
  const name = outcomesTable(table);
  const sql = sqliteOutcomeStatements(q(table), q(name));
  db.transaction(() => {
    const existing = db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(name) as string[];
    checkOutcomeColumns(existing, name, db.name, 'sqlite.table');
    if (existing.length > 0) return;
    db.exec(sql.create);
    db.prepare(sql.backfill).run(UNRECORDED, opening);
  })();
}

/** Writes, and takes back, the outcomes of a SQLite results table's runs. */
export interface SqliteOutcomes {
  /** A slice of the plan's outcomes, in one transaction. */
  record(runId: string, outcomes: readonly SeriesOutcome[]): void;
  discard(runId: string): void;
  keepOnly(runId: string): void;
}

export function sqliteOutcomes(db: Database.Database, table: string): SqliteOutcomes {
  const sql = sqliteOutcomeStatements(q(table), q(outcomesTable(table)));
  const record = db.prepare(sql.record);
  const recordAll = db.transaction((runId: string, outcomes: readonly SeriesOutcome[]) => {
    for (const o of outcomes) record.run(runId, o.query, o.country, o.lang, o.complete ? 1 : 0, o.reason);
  });
  return {
    record: (runId, outcomes) => void recordAll(runId, outcomes),
    discard: (runId: string) => void db.prepare(sql.discard).run(runId),
    keepOnly: (runId: string) => void db.prepare(sql.keepOnly).run(runId),
  };
}
