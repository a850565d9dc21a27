import type Database from 'better-sqlite3';
import { quoteIdentifier } from '../sql-identifier.ts';
import { SQLITE } from './dialect.ts';
import { keySpendViewSql, type ResultsView, resultsViewsSql, type RunsRead, spendViewSql, sqliteReaderStatements, trackedLatestViewSql, trackedViewSql, viewStatements } from './statements.ts';
import { trackedTable } from '../sinks/series-tracked.ts';
import { outcomesTable } from '../sinks/series-outcomes.ts';
import { prepareSqliteOutcomes } from '../sinks/sqlite-outcomes.ts';
import { tagColumnsOf } from './view-tags.ts';

/** Views get the results table's name in front, except for the default table: `report_rankings`, `serp_report_rankings`. */
export function viewName(table: string, view: ResultsView | 'spend' | 'tracked' | 'tracked_latest'): string {
  return table === 'results' || view === 'spend' ? `report_${view}` : `${table}_report_${view}`;
}

/**
 * Which views are true to the data. `changes` needs every run's rows (append); every view needs each series' rows
 * complete, which a dedupe wider than the series breaks (an item shared by two countries is kept in one only).
 */
export function applicableViews(mode: 'append' | 'replace' | 'upsert', seriesComplete: boolean): ResultsView[] {
  if (!seriesComplete) return [];
  return mode === 'append' ? ['rankings', 'domains', 'overlap', 'changes'] : ['rankings', 'domains', 'overlap'];
}

/** Views in the order they are dropped (dependents first) and created. */
export const DROP_ORDER = ['changes', 'overlap', 'domains', 'rankings'] as const;
export const CREATE_ORDER = ['rankings', 'domains', 'overlap', 'changes'] as const;

/** Which runs the views read for a table of each sink mode (`RunsRead`). */
export function runsRead(mode: 'append' | 'replace' | 'upsert'): RunsRead {
  return mode === 'upsert' ? 'latest' : 'complete';
}

/**
 * Creates (or re-creates, so that they follow the table) the views over a SQLite results table written in `mode`, and
 * the outcomes table they read beside it when it has none (`prepareSqliteOutcomes`: every run it holds then counts as
 * complete); `report_tracked` and `report_tracked_latest` where the table has tracked domains beside it.
 */
export function createResultsViews(db: Database.Database, table: string, views: readonly ResultsView[], mode: 'append' | 'replace' | 'upsert' = 'append'): void {
  const name = (view: ResultsView) => quoteIdentifier(viewName(table, view));
  db.transaction(() => {
    const tags = tagColumnsOf((db.prepare(sqliteReaderStatements.tableColumns).all(table) as { name: string }[]).map((column) => column.name));
    const indexed = db.prepare(sqliteReaderStatements.seriesIndexed).get(table) !== undefined;
    const sql = resultsViewsSql(quoteIdentifier(table), quoteIdentifier(outcomesTable(table)), name, SQLITE, runsRead(mode), tags, indexed);
    if (views.length > 0) prepareSqliteOutcomes(db, table);
    for (const view of DROP_ORDER) db.exec(viewStatements.drop(name(view)));
    for (const view of CREATE_ORDER) if (views.includes(view)) db.exec(viewStatements.create(name(view), sql[view]));
    // Beside a table whose pipeline tracks domains (sinks/series-tracked.ts): read from its own table, whatever the mode.
    const tracked = quoteIdentifier(viewName(table, 'tracked'));
    const latest = quoteIdentifier(viewName(table, 'tracked_latest'));
    db.exec(viewStatements.drop(latest));
    db.exec(viewStatements.drop(tracked));
    const has = (relation: string) => db.prepare(sqliteReaderStatements.tableColumns).all(relation).length > 0;
    if (has(trackedTable(table))) {
      const k = quoteIdentifier(trackedTable(table));
      db.exec(viewStatements.create(tracked, trackedViewSql(k, SQLITE)));
      // Ages count the runs the outcomes table records (a run that skipped every series has no tracked rows).
      db.exec(viewStatements.create(latest, trackedLatestViewSql(k, has(outcomesTable(table)) ? quoteIdentifier(outcomesTable(table)) : k, SQLITE)));
    }
  })();
}

/** The state store's own view of where the credits went, by day, key, pipeline and run (`keySpendViewSql`). */
export const KEY_SPEND_VIEW = 'webdata_spend';

/**
 * The spend views, in the SQLite state store: `report_spend` (by run, query, country and endpoint) and `webdata_spend`
 * (by day, key, pipeline and run, with the keys' allowances). Re-created each time a run opens the store, so that they
 * follow it, as the results' views follow their table; a file no run of this webdata-etl opened has neither.
 */
export function createSpendView(db: Database.Database): void {
  // The write lock first (BEGIN IMMEDIATE), as the migration takes it: processes opening one file together wait for
  // each other (busy timeout) rather than fail on a read that turned into a write.
  db.transaction(() => {
    for (const [view, select] of [
      [viewName('results', 'spend'), spendViewSql('', SQLITE)],
      [KEY_SPEND_VIEW, keySpendViewSql('', SQLITE)],
    ] as const) {
      db.exec(viewStatements.drop(quoteIdentifier(view)));
      db.exec(viewStatements.create(quoteIdentifier(view), select));
    }
  }).immediate();
}
