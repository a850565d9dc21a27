// Issue 43 item 4 on PostgreSQL: the views read what they show at a year of daily runs, not the whole results table
// (docs/benchmarks.md#a-year-on-one-database: `changes` took 9 s at 20 days of 1,000 series), nor the whole outcomes
// table beside it (365,000 rows at a year, grouped and sorted: 1.7 s of `changes`). Their walks and lookups go by the
// sink's B-trees on (md5(query), country, lang, run_id COLLATE "C"), and the outcomes' on (run_id COLLATE "C").
// Checked by the plans PostgreSQL makes (EXPLAIN), not by timing: over tables this small a Seq Scan is cheapest whatever
// the indexes, so the plans are made with seq scans priced out (`enable_seqscan = off`), which leaves one only where no
// index can answer (or a walk of a whole index instead). And the walks answer as the GROUP BYs over the whole tables
// do; a table made before the indexes gets them as a run opens it.
import { expect, it } from 'vitest';
import pg from 'pg';
import { POSTGRES } from '../../src/analytics/dialect.ts';
import { createPostgresResultsViews } from '../../src/analytics/postgres-views.ts';
import { resultsViewsSql } from '../../src/analytics/statements.ts';
import { applicableViews, runsRead } from '../../src/analytics/views.ts';
import { normalize, type PipelineDefinition, searchPages, toPostgres } from '../../src/index.ts';
import { type PoolClient, transaction } from '../../src/postgres/pools.ts';
import { preparePostgresOutcomes } from '../../src/sinks/postgres-outcomes.ts';
import { prepareTable } from '../../src/sinks/postgres-table.ts';
import { simulator } from '../helpers.ts';
import { runOn } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

const VIEWS = ['report_rankings', 'report_domains', 'report_overlap', 'report_changes'];

/** The steps of each view's plan that read the results table whole (a Seq Scan of it), seq scans priced out. */
async function tableScans(url: string): Promise<Record<string, string[]>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('SET enable_seqscan = off');
    const scans: Record<string, string[]> = {};
    for (const view of VIEWS) {
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN SELECT * FROM public.${view}`);
      scans[view] = rows.map((row) => row['QUERY PLAN'].trim()).filter((line) => /Seq Scan on results\b(?!_)/.test(line));
    }
    return scans;
  } finally {
    await client.end();
  }
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Recheck Cond'?: string;
  Plans?: PlanNode[];
}

/**
 * The steps of each view's plan (in `schema`) that read the outcomes table whole, seq scans priced out: a Seq Scan of
 * it, a scan of one of its indexes with no condition that is not a walk's first step (under a LIMIT), or a bitmap of
 * a whole index.
 */
async function outcomeReads(url: string, schema = 'public', views = VIEWS): Promise<Record<string, string[]>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('SET enable_seqscan = off');
    const reads: Record<string, string[]> = {};
    for (const view of views) {
      const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) SELECT * FROM ${schema}.${view}`);
      const found: string[] = [];
      const walk = (node: PlanNode, parent: string) => {
        const type = node['Node Type'];
        const whole =
          type === 'Seq Scan' ||
          (/^Index/.test(type) && node['Index Cond'] === undefined && parent !== 'Limit') ||
          (type === 'Bitmap Heap Scan' && node['Recheck Cond'] === undefined);
        if (node['Relation Name'] === 'results_outcomes' && whole) found.push(`${node['Node Type']} on results_outcomes${node['Index Name'] ? ` using ${node['Index Name']}` : ''}`);
        for (const child of node.Plans ?? []) walk(child, node['Node Type']);
      };
      walk(rows[0]!['QUERY PLAN'][0].Plan, '');
      reads[view] = found;
    }
    return reads;
  } finally {
    await client.end();
  }
}

/** Every view's rows (in `schema`) as sorted text, each row's columns in name order. */
async function viewRows(url: string, schema = 'public', views = VIEWS): Promise<Record<string, string[]>> {
  const rows: Record<string, string[]> = {};
  for (const view of views) {
    rows[view] = (await sql(url, `SELECT * FROM ${schema}.${view}`)).map((row) => JSON.stringify(Object.entries(row).sort(([a], [b]) => (a < b ? -1 : 1)))).sort();
  }
  return rows;
}

/**
 * The views as they read the outcomes without their indexes (a GROUP BY of the whole table), in the schema `grouped`,
 * for a table written in `mode`.
 */
async function groupedViews(url: string, mode: 'append' | 'upsert' = 'append'): Promise<void> {
  const texts = resultsViewsSql('public.results', 'public.results_outcomes', (view) => `grouped.report_${view}`, POSTGRES, runsRead(mode), [], true, false);
  await sql(url, 'CREATE SCHEMA grouped');
  for (const view of applicableViews(mode, true)) await sql(url, `CREATE VIEW grouped.report_${view} AS ${texts[view]}`);
}

const seriesIndex = async (url: string) => (await sql(url, `SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'results' AND indexdef LIKE '%md5(query), country, lang, run_id COLLATE "C"%'`)).length;
const outcomesIndexes = async (url: string) =>
  (await sql(url, `SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'results_outcomes' AND indexdef LIKE '%run_id COLLATE "C")'`)).length;
const NONE = Object.fromEntries(VIEWS.map((view) => [view, []]));

describePostgres('the PostgreSQL views read what they show', () => {
  it('no view reads the results or the outcomes table whole; the walks answer as the GROUP BYs; a table made before the indexes gets them as a run opens it', async () => {
    await using sim = await simulator({ seed: 7 });
    const db = await testDatabase();
    try {
      const pipeline: PipelineDefinition = {
        name: 'daily',
        source: searchPages({ queries: ['tea', 'coffee', 'kettle'], countries: ['us', 'gb', 'de'], langs: ['en', 'de'], maxPages: 1 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'results' })],
        state: { url: db.url },
      };
      // Three days' runs: each series has a current and a previous complete run. Then a fourth in which one query's
      // series fail: they are marked failed, compared with nothing, and shown as they last were whole.
      for (const day of [0, 1, 2]) {
        sim.setDay(day);
        expect((await runOn(sim, pipeline)).status).toBe('completed');
      }
      sim.setDay(3);
      sim.inject({ match: { q: 'kettle' }, fault: 'status', status: 400 });
      expect((await runOn(sim, pipeline)).status).toBe('failed_series');
      sim.clearRules();
      expect(await seriesIndex(db.url)).toBe(1);
      expect(await outcomesIndexes(db.url)).toBe(2);
      expect(await tableScans(db.url)).toEqual(NONE);
      // Neither does any view read the outcomes table whole: each series' runs are looked up along its index.
      expect(await outcomeReads(db.url)).toEqual(NONE);
      const walked = await viewRows(db.url);
      expect(walked.report_rankings?.length).toBe(3 * 3 * 2 * 10);
      expect(walked.report_changes?.length).toBeGreaterThanOrEqual(2 * 3 * 2 * 10 + 3 * 2);
      expect(walked.report_changes?.filter((row) => row.includes('"failed"')).length).toBe(3 * 2);
      // The same answers as the views that group the whole outcomes table (SQLite's text, and PostgreSQL's without the
      // indexes), which do read it whole.
      await groupedViews(db.url);
      expect(await viewRows(db.url, 'grouped')).toEqual(walked);
      expect((await outcomeReads(db.url, 'grouped')).report_changes?.length).toBeGreaterThan(0);

      // The index dropped, as a table made before it has none: the views read the table whole, and answer the same.
      await sql(db.url, 'DROP INDEX public.results_series_runs');
      const pool = new pg.Pool({ connectionString: db.url, max: 1 });
      try {
        await createPostgresResultsViews(pool, 'public', 'results', ['rankings', 'domains', 'overlap', 'changes']);
      } finally {
        await pool.end();
      }
      expect((await tableScans(db.url)).report_rankings?.length).toBeGreaterThan(0);
      expect(await viewRows(db.url)).toEqual(walked);

      // The outcomes' indexes dropped too, as a table made before them has none: the next run opening the table makes
      // them all, and the views walk them again.
      await sql(db.url, 'DROP INDEX public.results_outcomes_series, public.results_outcomes_runs');
      sim.setDay(4);
      expect((await runOn(sim, pipeline)).status).toBe('completed');
      expect(await seriesIndex(db.url)).toBe(1);
      expect(await outcomesIndexes(db.url)).toBe(2);
      expect(await tableScans(db.url)).toEqual(NONE);
      expect(await outcomeReads(db.url)).toEqual(NONE);
    } finally {
      await db.drop();
    }
  });

  it('upsert: the rankings and their ages walk the outcomes too, and answer as the grouping texts', async () => {
    await using sim = await simulator({ seed: 11 });
    const db = await testDatabase();
    try {
      const pipeline: PipelineDefinition = {
        name: 'latest',
        source: searchPages({ queries: ['tea', 'coffee'], countries: ['us', 'gb'], maxPages: 1 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'results', mode: 'upsert' })],
        state: { url: db.url },
      };
      for (const day of [0, 1, 2]) {
        sim.setDay(day);
        expect((await runOn(sim, pipeline)).status).toBe('completed');
      }
      const views = ['report_rankings', 'report_domains', 'report_overlap'];
      expect(await outcomesIndexes(db.url)).toBe(2);
      expect(await outcomeReads(db.url, 'public', views)).toEqual(Object.fromEntries(views.map((view) => [view, []])));
      const walked = await viewRows(db.url, 'public', views);
      expect(walked.report_rankings?.length).toBeGreaterThan(0);
      await groupedViews(db.url, 'upsert');
      expect(await viewRows(db.url, 'grouped', views)).toEqual(walked);
      expect((await outcomeReads(db.url, 'grouped', views)).report_rankings?.length).toBeGreaterThan(0);
    } finally {
      await db.drop();
    }
  });

  it('two runs opening a table made before the indexes at once: the second finds them made by the first, and goes on', async () => {
    const db = await testDatabase();
    const first = new pg.Pool({ connectionString: db.url, max: 1 });
    const second = new pg.Pool({ connectionString: db.url, max: 1 });
    // What a run opening the table does of it (the sink's `#prepare`): the table and its series index, the outcomes.
    const names = { schema: 'public', table: 'results', where: 'the test database' };
    const open = async (client: PoolClient) => {
      await prepareTable(client, names, ['run_id', 'query', 'country', 'lang'], []);
      await preparePostgresOutcomes(client, 'public', 'results', names.where);
    };
    try {
      await transaction(first, open);
      await sql(db.url, 'DROP INDEX public.results_series_runs, public.results_outcomes_series, public.results_outcomes_runs');
      const held = await first.connect();
      try {
        // The first makes the indexes and holds its transaction open; the second, not seeing them yet, makes them too
        // and waits on the first's (an index's name is a row of the catalog), then finds them there.
        await held.query('BEGIN');
        await open(held);
        const settled = transaction(second, open).then(
          () => 'opened',
          (error: unknown) => String(error),
        );
        const waiting = async () => (await sql(db.url, `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'CREATE INDEX%'`)).length > 0;
        for (let tries = 0; !(await waiting()); tries++) {
          if (tries > 200) throw new Error('the second never waited on the first');
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        await held.query('COMMIT');
        expect(await settled).toBe('opened');
      } finally {
        held.release();
      }
      expect(await seriesIndex(db.url)).toBe(1);
      expect(await outcomesIndexes(db.url)).toBe(2);
    } finally {
      await first.end();
      await second.end();
      await db.drop();
    }
  });

  it('a role that may write an outcomes table made before the indexes but not own it opens it without them', async () => {
    const db = await testDatabase();
    const role = `writer_${db.name}`;
    try {
      await sql(db.url, 'CREATE TABLE public.results (run_id text, query text, country text, lang text)');
      await sql(db.url, `INSERT INTO public.results VALUES ('r1', 'tea', 'us', 'en')`);
      const owner = new pg.Pool({ connectionString: db.url, max: 1 });
      try {
        await transaction(owner, (client) => preparePostgresOutcomes(client, 'public', 'results', 'the test database'));
      } finally {
        await owner.end();
      }
      expect(await outcomesIndexes(db.url)).toBe(2);
      await sql(db.url, 'DROP INDEX public.results_outcomes_series, public.results_outcomes_runs');
      await sql(db.url, `CREATE ROLE ${role} LOGIN; GRANT SELECT, INSERT, UPDATE, DELETE ON public.results, public.results_outcomes TO ${role}`);
      const url = new URL(db.url);
      url.username = role;
      const writer = new pg.Pool({ connectionString: url.toString(), max: 1 });
      try {
        // Refused the indexes (42501), it goes on in the same transaction: the outcomes are there to write.
        const rows = await transaction(writer, async (client) => {
          await preparePostgresOutcomes(client, 'public', 'results', 'the test database', 'r2');
          return (await client.query('SELECT run_id, reason FROM public.results_outcomes')).rows;
        });
        expect(rows).toEqual([{ run_id: 'r1', reason: 'unrecorded' }]);
      } finally {
        await writer.end();
      }
      expect(await outcomesIndexes(db.url)).toBe(0);
    } finally {
      await sql(db.url, `DROP OWNED BY ${role}; DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
      await db.drop();
    }
  });
});
