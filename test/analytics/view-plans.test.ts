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

/** A daily pipeline of one page a series into the SQLite file `path`. */
const daily = (path: string, series: { queries: string[]; countries: string[]; langs?: string[] }) => ({
  name: 'daily',
  source: searchPages({ ...series, maxPages: 1 }),
  stages: [normalize()],
  sinks: [toSqlite({ path, table: 'results' })],
});

/** Rows as sorted text, each with its columns in name order. */
const byKey = (rows: Row[]) => rows.map((row) => JSON.stringify(Object.entries(row).sort(([a], [b]) => (a < b ? -1 : 1)))).sort();

describe('the views read what they show', () => {
  it('no view scans the results table or its series index; the walk along the index answers as the GROUP BY over the table', async () => {
    await using sim = await simulator({ seed: 7 });
    using dir = workdir();
    const path = dir.path('daily.sqlite');
    const pipeline = daily(path, { queries: ['tea', 'coffee', 'kettle'], countries: ['us', 'gb', 'de'], langs: ['en', 'de'] });
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

/**
 * The plan's steps that walk the outcomes table reading its rows (a SCAN not from a covering index), and those that
 * read the index that covers them. A lookup of one row by its whole key is not a walk.
 */
function outcomeRowReads(path: string, view: string): { rowReads: string[]; covered: number } {
  const db = new Database(path, { readonly: true });
  try {
    const plan = (db.prepare(`EXPLAIN QUERY PLAN SELECT * FROM ${view}`).all() as { detail: string }[]).map((step) => step.detail);
    return {
      rowReads: plan.filter((detail) => /^SCAN /.test(detail) && detail.includes('results_outcomes') && !detail.includes('USING COVERING INDEX')),
      covered: plan.filter((detail) => detail.includes('USING COVERING INDEX results_outcomes_read')).length,
    };
  } finally {
    db.close();
  }
}

describe('the outcomes table is read from an index that covers it', () => {
  it('changes and rankings read no outcome row, only the index; a table made before the index gets it as a run opens it', async () => {
    await using sim = await simulator({ seed: 7 });
    using dir = workdir();
    const path = dir.path('daily.sqlite');
    const pipeline = daily(path, { queries: ['tea', 'coffee'], countries: ['us', 'gb'] });
    expect((await runOn(sim, pipeline)).status).toBe('completed');
    // As a table made before the index was: none. The next run opening it makes it.
    const db = new Database(path);
    db.exec('DROP INDEX IF EXISTS results_outcomes_read');
    db.close();
    expect((await runOn(sim, pipeline)).status).toBe('completed');
    for (const view of ['report_changes', 'report_rankings']) {
      const reads = outcomeRowReads(path, view);
      expect(reads.rowReads, view).toEqual([]);
      expect(reads.covered, view).toBeGreaterThan(0);
    }
  });
});
