import type Database from 'better-sqlite3';
import { checkOutcomeColumns, outcomesTable, type SeriesOutcome, UNRECORDED } from './series-outcomes.ts';
import { sqliteOutcomeStatements, sqliteSinkStatements } from './statements.ts';

/**
 * The outcomes table beside a SQLite results table (`series-outcomes.ts`), created when missing. Created beside a
 * table that already holds runs (one written before outcomes were recorded), it records each of them as complete
 * (`unrecorded`), but `opening`, the run being opened now, which records its own when it closes.
 */
export function prepareSqliteOutcomes(db: Database.Database, table: string, opening = ''): void {
  const name = outcomesTable(table);
  const sql = sqliteOutcomeStatements(table);
  db.transaction(() => {
    const existing = db.prepare(sqliteSinkStatements.tableColumns).pluck().all(name) as string[];
    checkOutcomeColumns(existing, name, db.name, 'sqlite.table');
    if (existing.length > 0) return void db.exec(sql.index);
    db.exec(sql.create);
    db.exec(sql.index);
    db.prepare(sql.backfill).run(UNRECORDED, opening);
  })();
}

/** Writes, and takes back, the outcomes of a SQLite results table's runs. */
export interface SqliteOutcomes {
  /**
   * A slice of the plan's outcomes, in one transaction: each series' row where the run reached it, and a `not_reached`
   * one only where that is news (docs/analytics.md#failed-and-unreached-series).
   */
  record(runId: string, outcomes: readonly SeriesOutcome[]): void;
  discard(runId: string): void;
  /** The run's rows alone stay (a `replace` table's run finished), a series not reached since before still said so. */
  keepOnly(runId: string): void;
}

export function sqliteOutcomes(db: Database.Database, table: string): SqliteOutcomes {
  const sql = sqliteOutcomeStatements(table);
  const record = db.prepare(sql.record);
  // The first outcome this process records of a run is written whatever it is: the run is in the table from then on.
  let recording: string | undefined;
  const recordAll = db.transaction((runId: string, outcomes: readonly SeriesOutcome[]) => {
    for (const o of outcomes) {
      record.run({ run: runId, query: o.query, country: o.country, lang: o.lang, complete: o.complete ? 1 : 0, reason: o.reason, force: recording === runId ? 0 : 1 });
      recording = runId;
    }
  });
  return {
    record: (runId, outcomes) => void recordAll(runId, outcomes),
    discard: (runId: string) => void db.prepare(sql.discard).run(runId),
    keepOnly(runId: string) {
      db.prepare(sql.carry).run(runId);
      db.prepare(sql.keepOnly).run(runId);
    },
  };
}
