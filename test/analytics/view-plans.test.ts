// Issue 43 item 4: "the analytics views and `runs` still under a second" at a year of daily runs. A view that reads
// the whole results table grows with every run the table keeps (docs/benchmarks.md#a-year-on-one-database): the
// views must find the rows they show by the table's series index, (query, country, lang, run_id). Checked by the plans
// SQLite makes for them (EXPLAIN QUERY PLAN), over a table a real pipeline wrote through the sink (its index and its
// outcomes as a run leaves them), not by timing; and the walk along the index answers as the GROUP BY over the whole
// table does.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createResultsViews } from '../../src/analytics/index.ts';
import { normalize, searchPages, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { type Row, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const VIEWS = ['report_rankings', 'report_domains', 'report_overlap', 'report_changes'];

/** The plan's steps that read the results table whole: a SCAN of it (by its name or the views' aliases) or of its series index. */
function fullScans(path: string, view: string): string[] {
  const db = new Database(path, { readonly: true });
  try {
    const plan = db.prepare(`EXPLAIN QUERY PLAN SELECT * FROM ${view}`).all() as { detail: string }[];
    return plan.map((step) => step.detail).filter((detail) => /^SCAN (results|r|i)\b/.test(detail) || /^SCAN .*\bresults_series\b/.test(detail));
  } finally {
    db.close();
  }
}

/** Rows as sorted text, each with its columns in name order. */
const byKey = (rows: Row[]) => rows.map((row) => JSON.stringify(Object.entries(row).sort(([a], [b]) => (a < b ? -1 : 1)))).sort();

describe('the views read what they show', () => {
  it('no view scans the results table or its series index; the walk along the index answers as the GROUP BY over the table', async () => {
    await using sim = await simulator({ seed: 7 });
    using dir = workdir();
    const path = dir.path('daily.sqlite');
    const pipeline = {
      name: 'daily',
      source: searchPages({ queries: ['tea', 'coffee', 'kettle'], countries: ['us', 'gb', 'de'], langs: ['en', 'de'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path, table: 'results' })],
    };
    // Three days' runs: each series has a current and a previous complete run.
    for (const day of [0, 1, 2]) {
      sim.setDay(day);
      expect((await runOn(sim, pipeline)).status).toBe('completed');
    }
    expect(Object.fromEntries(VIEWS.map((view) => [view, fullScans(path, view)]))).toEqual(Object.fromEntries(VIEWS.map((view) => [view, []])));

    // The same views read by the GROUP BY, the table's series index dropped: the same rows.
    const walked = Object.fromEntries(VIEWS.map((view) => [view, byKey(sqliteRows(path, `SELECT * FROM ${view}`))]));
    expect(walked.report_rankings?.length).toBe(3 * 3 * 2 * 10);
    expect(walked.report_changes?.length).toBeGreaterThanOrEqual(3 * 3 * 2 * 10);
    const db = new Database(path);
    db.exec('DROP INDEX results_series');
    createResultsViews(db, 'results', ['rankings', 'domains', 'overlap', 'changes']);
    db.close();
    for (const view of VIEWS) expect(byKey(sqliteRows(path, `SELECT * FROM ${view}`)), view).toEqual(walked[view]);
  });
});
