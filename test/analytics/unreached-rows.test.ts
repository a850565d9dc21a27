// Issue 43, item 8: a run's close writes what the run did, not a row per series of the plan. A series the run never
// reached has no row in `<table>_outcomes`, and the views read the missing row as `not_reached`, as they read the row
// before (docs/analytics.md#failed-and-unreached-series).
import { expect, it } from 'vitest';
import { outcomesReadSql } from '../../src/analytics/statements.ts';
import { SQLITE } from '../../src/analytics/dialect.ts';
import { normalize, type PipelineDefinition, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { type Row, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const QUERIES = Array.from({ length: 100 }, (_, i) => `query ${i}`);

/** A hundred series of one page each, one request at a time: a budget of 3 reaches the few started at once. */
function plan(sinks: PipelineDefinition['sinks'], budget?: number): PipelineDefinition {
  return {
    name: 'unreached',
    source: searchPages({ queries: QUERIES, countries: ['us'], maxPages: 1 }),
    stages: [normalize()],
    sinks,
    rate: { concurrency: 1 },
    ...(budget === undefined ? {} : { budget: { maxCredits: budget } }),
  };
}

/** Run 1 complete, run 2 stopped by its budget: the rows run 2's close wrote, and what the views read of it. */
async function mostlyNotReached(sinks: () => PipelineDefinition['sinks'], read: (query: string) => Promise<Row[]>) {
  await using sim = await simulator({ seed: 43 });
  const first = (await runOn(sim, plan(sinks()))).runId;
  const second = await runOn(sim, plan(sinks(), 3));
  expect(second.status).toBe('budget');
  const written = await read(`SELECT query, complete, reason FROM results_outcomes WHERE run_id = '${second.runId}'`);
  // Before: one row per planned series (100). After: the series the run reached (those started at once, cut short by
  // the budget, and the three it completed), and the plan's first, which records the run itself.
  expect(written.length).toBeLessThanOrEqual(12);
  expect(written.length).toBeGreaterThan(0);
  // The views read every series run 2 did not complete as failed in it, with why: those it never reached, not_reached.
  const complete = new Set(written.filter((o) => Number(o.complete) === 1).map((o) => o.query));
  const failed = await read(`SELECT query, reason, run_id, previous_run_id FROM report_changes WHERE change = 'failed' ORDER BY query`);
  expect(failed.map((f) => f.query).sort()).toEqual(QUERIES.filter((q) => !complete.has(q)).sort());
  const recorded = new Map(written.map((o) => [o.query, o.reason]));
  for (const f of failed) {
    expect(f).toEqual({ query: f.query, reason: recorded.get(f.query) ?? 'not_reached', run_id: second.runId, previous_run_id: first });
  }
  expect(failed.filter((f) => f.reason === 'not_reached').length).toBeGreaterThan(80);
  return { first, second: second.runId };
}

it('SQLite: a close writes a row for the series the run reached, not for the plan; the views read the others as not_reached', async () => {
  using dir = workdir();
  const path = dir.path('rank.sqlite');
  const { second } = await mostlyNotReached(() => [toSqlite({ path })], async (query) => sqliteRows(path, query));
  // Read as every reader reads outcomes: a row per series of the plan in run 2, as the close wrote them before.
  const read = sqliteRows(path, `SELECT query, reason FROM (${outcomesReadSql('results_outcomes', SQLITE)}) e WHERE run_id = '${second}'`);
  expect(read.map((o) => o.query).sort()).toEqual([...QUERIES].sort());
});

describePostgres('PostgreSQL', () => {
  it('a close writes a row for the series the run reached; the views read the others as not_reached', async () => {
    const db = await testDatabase();
    try {
      await mostlyNotReached(() => [toPostgres({ url: db.url, table: 'results' })], async (query) => (await sql(db.url, query.replaceAll('results_outcomes', 'public.results_outcomes').replaceAll('report_changes', 'public.report_changes'))) as Row[]);
    } finally {
      await db.drop();
    }
  });
});
