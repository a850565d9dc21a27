// Issue 32 §4, "failed is not 'not ranked'": a series that failed, ran out of budget or was not reached in a run shows
// neither its URLs as lost nor its ranks as dropped — in the changes view, the rankings or the report. It is compared
// with its last complete run once it completes again, and marked `failed` until then (docs/analytics.md#failed-and-unreached-series).
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { expect, it } from 'vitest';
import { exportReport } from '../../src/analytics/index.ts';
import { openReader } from '../../src/analytics/reader.ts';
import { SQLITE } from '../../src/analytics/dialect.ts';
import { outcomesReadSql } from '../../src/analytics/statements.ts';
import { normalize, type PipelineDefinition, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { transaction } from '../../src/postgres/pools.ts';
import { readReportData } from '../../src/report/data.ts';
import { postgresOutcomes, preparePostgresOutcomes } from '../../src/sinks/postgres-outcomes.ts';
import { prepareSqliteOutcomes, sqliteOutcomes } from '../../src/sinks/sqlite-outcomes.ts';
import { renderReport } from '../../src/report/index.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { handMadeDatabase, R1, R2 } from './analytics-fixture.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { type Row, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const QUERIES = Array.from({ length: 12 }, (_, i) => `query ${String.fromCharCode(97 + i)}`);
/** Fails on its second page in run 2: the rows of its first page are there, the rest are not. */
const PART_FAILED = 'query b';
/** Fails on its first page in run 2: no rows at all. */
const FAILED = 'query c';

/** Twelve series of two full pages each (`max_pages`), one request at a time, so that a budget leaves some behind. */
function tracking(sinks: PipelineDefinition['sinks'], budget?: number): PipelineDefinition {
  return {
    name: 'tracking',
    source: searchPages({ queries: QUERIES, countries: ['us'], maxPages: 2 }),
    stages: [normalize()],
    sinks,
    rate: { concurrency: 1 },
    ...(budget === undefined ? {} : { budget: { maxCredits: budget } }),
  };
}

/** Run 2's faults: two series fail on purpose, and a budget too small for the rest leaves some cut short or never started. */
function failTwo(sim: Simulator): void {
  sim.inject({ match: { q: PART_FAILED, page: 2 }, fault: 'status', status: 400 });
  sim.inject({ match: { q: FAILED, page: 1 }, fault: 'status', status: 400 });
}
const RUN_2_BUDGET = 10;
/** The outcomes as every reader reads them: a run's close records only the series it reached (`outcomesReadSql`). */
const ENDED = outcomesReadSql('results_outcomes', SQLITE);

type Change = [dedupeKey: string, previous: number | null, current: number | null, delta: number | null, change: string];

/** What changed in a series between two runs, computed here from its rows: the best rank of each dedupe key in each. */
function expectedChanges(rows: readonly Row[], query: string, previous: string | null, current: string): Change[] {
  const best = (run: string | null) => {
    const ranks = new Map<string, number>();
    for (const row of rows) {
      if (row.query !== query || row.run_id !== run || row.dedupe_key === null) continue;
      const key = String(row.dedupe_key);
      ranks.set(key, Math.min(ranks.get(key) ?? Number.POSITIVE_INFINITY, Number(row.rank)));
    }
    return ranks;
  };
  const [before, after] = [best(previous), best(current)];
  const changes: Change[] = [];
  for (const [key, rank] of after) {
    const was = before.get(key);
    changes.push([key, was ?? null, rank, was === undefined ? null : was - rank, was === undefined ? 'new' : rank < was ? 'up' : rank > was ? 'down' : 'same']);
  }
  for (const [key, rank] of before) if (!after.has(key)) changes.push([key, rank, null, null, 'lost']);
  return sort(changes);
}

const sort = (changes: Change[]): Change[] => changes.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

/** The changes view's rows of one series, as `Change`s. */
function viewChanges(rows: readonly Row[], query: string): Change[] {
  return sort(rows.filter((r) => r.query === query).map((r) => [String(r.dedupe_key), r.previous_rank as number | null, r.current_rank as number | null, r.rank_delta as number | null, String(r.change)]));
}

/** Reads what the report would show for one query (its history), from a SQLite file or a PostgreSQL URL. */
async function history(database: string, query: string) {
  const reader = await openReader(database);
  try {
    const data = await readReportData(reader, { table: 'results', query, maxQueries: 1, maxLines: 6, maxRuns: 50 });
    return data.histories[0];
  } finally {
    await reader.close();
  }
}

/**
 * The three runs of the issue, over real sockets against the simulator: run 1 all complete; run 2 with two series failed
 * on purpose and a budget that leaves others behind; run 3 all complete again. Checks every view and the report after
 * runs 2 and 3, reading `path` (SQLite) — and, when given, compares `other` (a second output of the same runs) with it.
 */
async function threeRuns(sinks: () => PipelineDefinition['sinks'], path: string, check?: { other: string; between?: () => Promise<void> }) {
  await using sim = await simulator({ seed: 32, driftEveryMs: 1, resultsPerQuery: 40 });
  const run1 = (await runOn(sim, tracking(sinks()))).runId;
  await check?.between?.();

  failTwo(sim);
  const second = await runOn(sim, tracking(sinks(), RUN_2_BUDGET));
  const run2 = second.runId;
  expect(second.status).toBe('failed_series');
  sim.clearRules();

  // How each series ended in run 2, beside the rows, as the views read them (a series not reached has no row there).
  const outcomes = sqliteRows(path, `SELECT query, complete, reason FROM (${ENDED}) e WHERE run_id = '${run2}' ORDER BY query`);
  expect(outcomes.map((o) => o.query)).toEqual(QUERIES);
  const incomplete = new Map(outcomes.filter((o) => o.complete === 0).map((o) => [String(o.query), String(o.reason)]));
  expect(incomplete.get(PART_FAILED)).toBe('failed');
  expect(incomplete.get(FAILED)).toBe('failed');
  // The budget cut some series short and left the last one unstarted (8 series start at once, one request at a time:
  // when the first of them ends, the budget is spent), and let others complete.
  expect(new Set(incomplete.values())).toEqual(new Set(['failed', 'budget', 'not_reached']));
  expect(incomplete.size).toBeLessThan(QUERIES.length);
  // Run 1 and run 2 rows of a series cut short: there are some (its first page), not all.
  const rows = () => sqliteRows(path, 'SELECT run_id, query, rank, dedupe_key FROM results ORDER BY rowid');
  const partial = rows().filter((r) => r.query === PART_FAILED);
  expect(partial.filter((r) => r.run_id === run2).length).toBeGreaterThan(0);
  expect(partial.filter((r) => r.run_id === run2).length).toBeLessThan(partial.filter((r) => r.run_id === run1).length);

  // changes: no series that did not complete shows anything lost; each is one row, `failed`, naming the complete run it
  // would be compared with; the series that completed are compared with run 1, and right.
  let changes = sqliteRows(path, 'SELECT * FROM report_changes');
  for (const [query, reason] of incomplete) {
    expect(changes.filter((c) => c.query === query)).toEqual([
      { query, country: 'us', lang: '', dedupe_key: null, url: null, title: null, previous_rank: null, current_rank: null, rank_delta: null, change: 'failed', run_id: run2, previous_run_id: run1, reason },
    ]);
  }
  for (const query of QUERIES.filter((q) => !incomplete.has(q))) {
    const mine = changes.filter((c) => c.query === query);
    expect(new Set(mine.map((c) => `${c.run_id} ${c.previous_run_id}`)), query).toEqual(new Set([`${run2} ${run1}`]));
    expect(viewChanges(mine, query), query).toEqual(expectedChanges(rows(), query, run1, run2));
  }
  expect(changes.some((c) => c.change === 'up' || c.change === 'down'), 'the rankings moved between runs').toBe(true);
  // rankings: a series that did not complete is shown as it last was whole (run 1), not as its first page.
  const ranked = (query: string) => sqliteRows(path, `SELECT run_id, count(*) AS n FROM report_rankings WHERE query = '${query}' GROUP BY run_id`);
  expect(ranked(PART_FAILED)).toEqual([{ run_id: run1, n: partial.filter((r) => r.run_id === run1).length }]);
  expect(ranked(FAILED)).toEqual([{ run_id: run1, n: 20 }]);

  // The report: run 2 of a failed query is shaded and labelled, its ranks not drawn as gone.
  const afterTwo = await history(path, PART_FAILED);
  expect(afterTwo?.incomplete).toEqual([null, 'failed']);
  expect(afterTwo?.series.length).toBeGreaterThan(0);
  for (const line of afterTwo?.series ?? []) expect(line.ranks[1]).toBeNull();
  const html = await renderReport({ database: path, query: PART_FAILED });
  expect(html).toContain('data-mark="incomplete"');
  expect(html).toContain('did not complete in it');
  if (check) await compare(path, check.other);

  // Run 3, all complete: each series that did not complete in run 2 is compared with run 1, its last complete run.
  const run3 = (await runOn(sim, tracking(sinks()))).runId;
  changes = sqliteRows(path, 'SELECT * FROM report_changes');
  expect(changes.filter((c) => c.change === 'failed')).toEqual([]);
  for (const query of QUERIES) {
    const since = incomplete.has(query) ? run1 : run2;
    const mine = changes.filter((c) => c.query === query);
    expect(new Set(mine.map((c) => `${c.run_id} ${c.previous_run_id}`)), query).toEqual(new Set([`${run3} ${since}`]));
    expect(viewChanges(mine, query), query).toEqual(expectedChanges(rows(), query, since, run3));
  }
  const afterThree = await history(path, PART_FAILED);
  expect(afterThree?.incomplete).toEqual([null, 'failed', null]);
  for (const line of afterThree?.series ?? []) expect(line.ranks[1]).toBeNull();
  if (check) await compare(path, check.other);
}

/** Both outputs export the same bytes for every view, and the report reads the same from both. */
async function compare(sqlite: string, other: string): Promise<void> {
  using dir = workdir();
  for (const report of ['rankings', 'domains', 'overlap', 'changes'] as const) {
    await exportReport({ database: sqlite, report, format: 'csv', out: dir.path(`s-${report}.csv`) });
    await exportReport({ database: other, report, format: 'csv', out: dir.path(`o-${report}.csv`) });
    expect(readFileSync(dir.path(`o-${report}.csv`), 'utf8'), report).toEqual(readFileSync(dir.path(`s-${report}.csv`), 'utf8'));
  }
  expect(await history(other, PART_FAILED)).toEqual(await history(sqlite, PART_FAILED));
}

it('SQLite: a series failed on purpose, or left behind by the budget, is marked failed and compared with its last complete run', async () => {
  using dir = workdir();
  await threeRuns(() => [toSqlite({ path: dir.path('rank.sqlite') })], dir.path('rank.sqlite'));
});

/** The views as webdata-etl made them before outcomes were recorded (results schema 1): the table's last two runs. */
function asBeforeOutcomes(path: string): void {
  const db = new Database(path);
  db.exec(`DROP TABLE results_outcomes; PRAGMA user_version = 1;
    DROP VIEW report_changes; DROP VIEW report_rankings;
    CREATE VIEW report_rankings AS
      SELECT r.query, r.country, r.lang, r.rank, r.title, r.url, r.domain, r.page, r.position, r.dedupe_key, r.run_id, r.fetched_at
      FROM results r
      JOIN (SELECT query, country, lang, MAX(run_id) AS run_id FROM results GROUP BY query, country, lang) latest
        ON latest.query = r.query AND latest.country = r.country AND latest.lang = r.lang AND latest.run_id = r.run_id;
    CREATE VIEW report_changes AS
      WITH latest AS (SELECT DISTINCT run_id AS run_id FROM results ORDER BY run_id DESC LIMIT 2),
      cur AS (SELECT query, country, lang, dedupe_key, MIN(rank) AS rank, MAX(url) AS url, MAX(title) AS title FROM results
              WHERE run_id = (SELECT MAX(run_id) FROM latest) AND dedupe_key IS NOT NULL GROUP BY query, country, lang, dedupe_key),
      prev AS (SELECT query, country, lang, dedupe_key, MIN(rank) AS rank, MAX(url) AS url, MAX(title) AS title FROM results
               WHERE run_id = (SELECT MIN(run_id) FROM latest) AND (SELECT COUNT(*) FROM latest) = 2 AND dedupe_key IS NOT NULL
               GROUP BY query, country, lang, dedupe_key)
      SELECT c.query, c.country, c.lang, c.dedupe_key, c.url, c.title, p.rank AS previous_rank, c.rank AS current_rank,
        p.rank - c.rank AS rank_delta,
        CASE WHEN p.rank IS NULL THEN 'new' WHEN c.rank < p.rank THEN 'up' WHEN c.rank > p.rank THEN 'down' ELSE 'same' END AS change
      FROM cur c LEFT JOIN prev p ON p.query = c.query AND p.country = c.country AND p.lang = c.lang AND p.dedupe_key = c.dedupe_key
      UNION ALL
      SELECT p.query, p.country, p.lang, p.dedupe_key, p.url, p.title, p.rank, NULL, NULL, 'lost'
      FROM prev p LEFT JOIN cur c ON c.query = p.query AND c.country = p.country AND c.lang = p.lang AND c.dedupe_key = p.dedupe_key
      WHERE c.dedupe_key IS NULL;`);
  db.close();
}

it('a database written before outcomes were recorded reads as it did, and the next run brings it up (its runs taken as complete)', async () => {
  using dir = workdir();
  const path = dir.path('hand.sqlite');
  handMadeDatabase(path);
  asBeforeOutcomes(path);
  // Read as it is (export and report open it read-only): its own views, the newer columns empty.
  await exportReport({ database: path, report: 'changes', format: 'jsonl', out: dir.path('old.jsonl') });
  const old = readFileSync(dir.path('old.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Row);
  expect(old.map((r) => `${r.country} ${String(r.dedupe_key).slice(-1)} ${r.change} ${r.run_id} ${r.reason}`).sort()).toEqual(
    ['gb a down', 'gb b new', 'gb d up', 'us a down', 'us b up', 'us c lost', 'us e new'].map((s) => `${s} null null`),
  );
  expect(await renderReport({ database: path })).toContain('data-chart="history"');
  expect((await history(path, 'q'))?.incomplete).toEqual([null, null]);

  // The next run of its pipeline opens it: the outcomes table is made, its two runs recorded as complete (unrecorded).
  await using sim = await simulator({ seed: 4 });
  const run3 = (await runOn(sim, { name: 'hand', source: searchPages({ queries: ['q'], countries: ['us', 'gb'], langs: ['en'], maxPages: 1 }), stages: [normalize()], sinks: [toSqlite({ path })] }))
    .runId;
  expect(sqliteRows(path, 'PRAGMA user_version')).toEqual([{ user_version: 2 }]);
  expect(sqliteRows(path, 'SELECT run_id, country, complete, reason FROM results_outcomes ORDER BY run_id, country')).toEqual([
    { run_id: R1, country: 'gb', complete: 1, reason: 'unrecorded' },
    { run_id: R1, country: 'us', complete: 1, reason: 'unrecorded' },
    { run_id: R2, country: 'gb', complete: 1, reason: 'unrecorded' },
    { run_id: R2, country: 'us', complete: 1, reason: 'unrecorded' },
    { run_id: run3, country: 'gb', complete: 1, reason: 'max_pages' },
    { run_id: run3, country: 'us', complete: 1, reason: 'max_pages' },
  ]);
  // The new views compare the new run with the last of the old ones.
  const changes = sqliteRows(path, 'SELECT DISTINCT country, run_id, previous_run_id FROM report_changes ORDER BY country');
  expect(changes).toEqual([
    { country: 'gb', run_id: run3, previous_run_id: R2 },
    { country: 'us', run_id: run3, previous_run_id: R2 },
  ]);
});

it('a run that stops part way leaves its series outcomes, and its resume completes them', async () => {
  await using sim = await simulator({ seed: 6, resultsPerQuery: 40 });
  using dir = workdir();
  const path = dir.path('stop.sqlite');
  const first = (await runOn(sim, tracking([toSqlite({ path })]))).runId;
  // A 402 stops the run at once: series under way and not started yet are left for its resume.
  sim.inject({ match: { q: 'query d', page: 2 }, fault: 'status', status: 402, times: 1 });
  const stopped = await runOn(sim, tracking([toSqlite({ path })]));
  expect(stopped.status).toBe('stopped');
  const left = sqliteRows(path, `SELECT query, reason FROM (${ENDED}) e WHERE run_id = '${stopped.runId}' AND complete = 0`);
  expect(left.length).toBeGreaterThan(0);
  for (const o of left) expect(['payment_required', 'not_reached']).toContain(o.reason);
  // Not compared while they are left: marked, with the run they would be compared with.
  const marked = sqliteRows(path, `SELECT query, previous_run_id FROM report_changes WHERE change = 'failed'`);
  expect(marked.map((m) => m.query).sort()).toEqual(left.map((o) => o.query).sort());
  expect(new Set(marked.map((m) => m.previous_run_id))).toEqual(new Set([first]));
  // The resume completes them: the run's outcomes are recorded again, all complete, and compared.
  const resumed = await runOn(sim, tracking([toSqlite({ path })]));
  expect(resumed.runId).toBe(stopped.runId);
  expect(sqliteRows(path, `SELECT count(*) AS n FROM results_outcomes WHERE run_id = '${stopped.runId}' AND complete = 1`)).toEqual([{ n: QUERIES.length }]);
  expect(sqliteRows(path, `SELECT count(*) AS n FROM report_changes WHERE change = 'failed'`)).toEqual([{ n: 0 }]);
});

/** Records one series' outcome three times in a run, as three invocations (or workers) would, and reads it back after each. */
async function recordedAgain(record: (complete: boolean, reason: string) => Promise<void>, read: () => Promise<Row[]>): Promise<void> {
  await record(false, 'interrupted');
  expect(await read()).toEqual([{ complete: 0, reason: 'interrupted' }]);
  await record(true, 'short');
  expect(await read()).toEqual([{ complete: 1, reason: 'short' }]);
  // A record read before the series completed, written after (a worker that left earlier, slower): it stays complete.
  await record(false, 'interrupted');
  expect(await read()).toEqual([{ complete: 1, reason: 'short' }]);
}

it('SQLite: a series recorded again takes the latest outcome, but one complete in a run stays complete', async () => {
  using dir = workdir();
  const db = new Database(dir.path('o.sqlite'));
  try {
    db.exec('CREATE TABLE results (run_id TEXT, query TEXT, country TEXT, lang TEXT)');
    prepareSqliteOutcomes(db, 'results');
    const outcomes = sqliteOutcomes(db, 'results');
    await recordedAgain(
      async (complete, reason) => outcomes.record('r', [{ query: 'q', country: 'us', lang: '', complete, reason }]),
      async () => db.prepare('SELECT complete, reason FROM results_outcomes').all() as Row[],
    );
  } finally {
    db.close();
  }
});

describePostgres('PostgreSQL', () => {
  it('the same runs into SQLite and PostgreSQL: the same outcomes and the same views, byte for byte; a table of before outcomes is brought up', async () => {
    using dir = workdir();
    const db = await testDatabase();
    try {
      const path = dir.path('both.sqlite');
      await threeRuns(() => [toSqlite({ path }), toPostgres({ url: db.url, table: 'results' })], path, {
        other: db.url,
        // The PostgreSQL table as an older webdata-etl left it, without outcomes: run 2 makes them, run 1 taken as complete.
        between: async () => void (await sql(db.url, 'DROP TABLE public.results_outcomes CASCADE')),
      });
      const outcomes = await sql(db.url, 'SELECT run_id, query, complete, reason FROM public.results_outcomes ORDER BY run_id, query');
      const inSqlite = sqliteRows(path, 'SELECT run_id, query, complete, reason FROM results_outcomes ORDER BY run_id, query');
      expect(outcomes.length).toBe(inSqlite.length);
      // Run 1 predates the table there (unrecorded); runs 2 and 3 are recorded alike in both.
      const [run1] = inSqlite.map((o) => o.run_id);
      expect(outcomes.filter((o) => o.run_id === run1).map((o) => o.reason)).toEqual(QUERIES.map(() => 'unrecorded'));
      expect(outcomes.filter((o) => o.run_id !== run1)).toEqual(inSqlite.filter((o) => o.run_id !== run1));
    } finally {
      await db.drop();
    }
  });

  it('a series recorded again takes the latest outcome, but one complete in a run stays complete', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      await sql(db.url, 'CREATE TABLE public.results (run_id text, query text, country text, lang text)');
      await transaction(pool, (client) => preparePostgresOutcomes(client, 'public', 'results', 'the test database'));
      const outcomes = postgresOutcomes(pool, 'public', 'results');
      await recordedAgain(
        (complete, reason) => outcomes.record('r', [{ query: 'q', country: 'us', lang: '', complete, reason }]),
        async () => (await sql(db.url, 'SELECT complete, reason FROM public.results_outcomes')) as Row[],
      );
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('with the run state in PostgreSQL too: a failed series is marked, not lost', async () => {
    await using sim = await simulator({ seed: 3, driftEveryMs: 1, resultsPerQuery: 40 });
    const db = await testDatabase();
    try {
      const pipeline = tracking([toPostgres({ url: db.url, table: 'results' })]);
      const run1 = (await runOn(sim, pipeline)).runId;
      failTwo(sim);
      const run2 = (await runOn(sim, pipeline)).runId;
      const changes = await sql(db.url, `SELECT query, change, run_id, previous_run_id, reason FROM public.report_changes WHERE query IN ($1, $2) ORDER BY query`, [PART_FAILED, FAILED]);
      expect(changes).toEqual([PART_FAILED, FAILED].map((query) => ({ query, change: 'failed', run_id: run2, previous_run_id: run1, reason: 'failed' })));
      expect(await sql(db.url, `SELECT DISTINCT run_id FROM public.report_rankings WHERE query = $1`, [PART_FAILED])).toEqual([{ run_id: run1 }]);
    } finally {
      await db.drop();
    }
  });
});
