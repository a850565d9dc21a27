// Issue 43, item 8: a run's close writes what changed, not a row per series of the plan. A series the run did not
// reach is a `not_reached` row only where its latest row said otherwise; the views read a missing row as that latest
// row says: `not_reached` if it does, nothing otherwise — so a series taken out of the plan has no line
// (docs/analytics.md#failed-and-unreached-series).
import { expect, it } from 'vitest';
import { SQLITE } from '../../src/analytics/dialect.ts';
import { outcomesReadSql } from '../../src/analytics/statements.ts';
import { normalize, type PipelineDefinition, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { type Row, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const QUERIES = Array.from({ length: 100 }, (_, i) => `query ${i}`);
/** Taken out of the plan for the last run: the queries file edited. */
const REMOVED = QUERIES.slice(90);

/** A hundred series of one page each, one request at a time: a budget of 3 reaches the few started at once. */
function plan(sinks: PipelineDefinition['sinks'], budget?: number, queries = QUERIES): PipelineDefinition {
  return {
    name: 'unreached',
    source: searchPages({ queries, countries: ['us'], maxPages: 1 }),
    stages: [normalize()],
    sinks,
    rate: { concurrency: 1 },
    ...(budget === undefined ? {} : { budget: { maxCredits: budget } }),
  };
}

type Read = (query: string) => Promise<Row[]>;

/** Each series' outcome in `run` as the views read them, by query. */
async function readAt(read: Read, run: string): Promise<Map<string, string>> {
  const rows = await read(`SELECT query, reason FROM report_changes WHERE change = 'failed' AND run_id = '${run}'`);
  return new Map(rows.map((r) => [String(r.query), String(r.reason)]));
}

/**
 * Run 1 complete; runs 2 and 3 stopped by their budget; run 4 complete; run 5 complete without `REMOVED`. The rows
 * each close wrote, and what the views read of them.
 */
async function fiveRuns(sinks: () => PipelineDefinition['sinks'], read: Read) {
  await using sim = await simulator({ seed: 43 });
  const written = async (run: string) => read(`SELECT query, complete, reason FROM results_outcomes WHERE run_id = '${run}'`);
  const first = (await runOn(sim, plan(sinks()))).runId;
  const second = await runOn(sim, plan(sinks(), 3));
  expect(second.status).toBe('budget');
  // Run 2: what it reached, and a not_reached row for each series it did not (each had completed before: news).
  expect((await written(second.runId)).length).toBe(100);

  const third = await runOn(sim, plan(sinks(), 3));
  expect(third.status).toBe('budget');
  // Run 3: what it reached and what run 2 had reached (not reached now: news); the ~90 left unreached since run 2 have
  // no row. Before: a row per series of the plan (100).
  const rows3 = await written(third.runId);
  expect(rows3.length).toBeGreaterThan(0);
  expect(rows3.length).toBeLessThanOrEqual(25);
  // The views read every series run 3 did not complete as failed there, with why: those it did not reach, not_reached.
  const complete3 = new Set(rows3.filter((o) => Number(o.complete) === 1).map((o) => String(o.query)));
  const failed3 = await readAt(read, third.runId);
  expect([...failed3.keys()].sort()).toEqual(QUERIES.filter((q) => !complete3.has(q)).sort());
  const recorded3 = new Map(rows3.map((o) => [String(o.query), String(o.reason)]));
  for (const [query, reason] of failed3) expect(reason).toBe(recorded3.get(query) ?? 'not_reached');
  expect([...failed3.values()].filter((r) => r === 'not_reached').length).toBeGreaterThan(80);
  // Each is compared with the last run that completed it: run 2 for a series run 2 completed and run 3 did not (a
  // request of run 3's that timed out under load leaves its budget short of run 2's series), run 1 for the others.
  const complete2 = new Set((await written(second.runId)).filter((o) => Number(o.complete) === 1).map((o) => String(o.query)));
  const compared3 = await read(`SELECT query, previous_run_id FROM report_changes WHERE change = 'failed' AND run_id = '${third.runId}'`);
  expect(compared3.length).toBe(failed3.size);
  for (const row of compared3) expect(row.previous_run_id).toBe(complete2.has(String(row.query)) ? second.runId : first);

  const fourth = (await runOn(sim, plan(sinks()))).runId;
  expect((await readAt(read, fourth)).size).toBe(0);
  const fifth = await runOn(sim, plan(sinks(), undefined, QUERIES.filter((q) => !REMOVED.includes(q))));
  expect(fifth.status).toBe('completed');
  // A series taken out of the plan has no row in run 5, and no line of `changes` there: not "not reached" for ever.
  const lines5 = await read(`SELECT query FROM report_changes WHERE run_id = '${fifth.runId}'`);
  expect(lines5.length).toBeGreaterThan(0);
  expect(lines5.filter((l) => REMOVED.includes(String(l.query)))).toEqual([]);
  expect((await readAt(read, fifth.runId)).size).toBe(0);
  return { runs: [first, second.runId, third.runId, fourth, fifth.runId] };
}

it('SQLite: a close writes a not_reached row only where it is news; the views read the rest as their latest row says', async () => {
  using dir = workdir();
  const path = dir.path('rank.sqlite');
  const { runs } = await fiveRuns(() => [toSqlite({ path })], async (query) => sqliteRows(path, query));
  // Read as every reader reads outcomes: a row per series of the plan in run 3, as the close wrote them before; in run
  // 5, none of the series taken out.
  const read = (run: string) => sqliteRows(path, `SELECT query, reason FROM (${outcomesReadSql('results_outcomes', SQLITE)}) e WHERE run_id = '${run}'`);
  expect(read(runs[2] as string).map((o) => o.query).sort()).toEqual([...QUERIES].sort());
  expect(read(runs[4] as string).map((o) => o.query).sort()).toEqual(QUERIES.filter((q) => !REMOVED.includes(q)).sort());
});

it('SQLite, replace: the series left unreached keep saying so in the run that stays', async () => {
  using dir = workdir();
  const path = dir.path('rank.sqlite');
  await using sim = await simulator({ seed: 43 });
  const sinks = () => [toSqlite({ path, mode: 'replace' })];
  await runOn(sim, plan(sinks()));
  const second = await runOn(sim, plan(sinks(), 3));
  // A run stopped by its budget finishes by its own rules: the table keeps its rows alone, outcomes with them.
  expect(second.status).toBe('budget');
  const third = await runOn(sim, plan(sinks(), 3));
  const rows = sqliteRows(path, `SELECT run_id, query, complete, reason FROM results_outcomes`);
  expect(new Set(rows.map((r) => r.run_id))).toEqual(new Set([third.runId]));
  // Every series: the ~90 not reached since run 2 carried into run 3 as the earlier runs went.
  expect(rows.map((r) => r.query).sort()).toEqual([...QUERIES].sort());
  expect(rows.filter((r) => r.reason === 'not_reached').length).toBeGreaterThan(80);
});

describePostgres('PostgreSQL', () => {
  it('a close writes a not_reached row only where it is news; the views read the rest as their latest row says', async () => {
    const db = await testDatabase();
    try {
      await fiveRuns(() => [toPostgres({ url: db.url, table: 'results' })], async (query) => (await sql(db.url, query.replaceAll('results_outcomes', 'public.results_outcomes').replaceAll('report_changes', 'public.report_changes'))) as Row[]);
    } finally {
      await db.drop();
    }
  });
});
