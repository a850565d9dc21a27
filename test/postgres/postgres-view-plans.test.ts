// Issue 43 item 4 on PostgreSQL: the views read what they show at a year of daily runs, not the whole results table
// (docs/benchmarks.md#a-year-on-one-database: `changes` took 9 s at 20 days of 1,000 series). Their walks and lookups
// go by the sink's B-tree on (md5(query), country, lang, run_id COLLATE "C"). Checked by the plans PostgreSQL makes
// (EXPLAIN), not by timing: over tables this small a Seq Scan is cheapest whatever the indexes, so the plans are made
// with seq scans priced out (`enable_seqscan = off`), which leaves one only where no index can answer. And the walk
// answers as the GROUP BY over the whole table does; a table made before the index gets it as a run opens it.
import { expect, it } from 'vitest';
import pg from 'pg';
import { createPostgresResultsViews } from '../../src/analytics/postgres-views.ts';
import { normalize, type PipelineDefinition, searchPages, toPostgres } from '../../src/index.ts';
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

/** Every view's rows as sorted text, each row's columns in name order. */
async function viewRows(url: string): Promise<Record<string, string[]>> {
  const rows: Record<string, string[]> = {};
  for (const view of VIEWS) {
    rows[view] = (await sql(url, `SELECT * FROM public.${view}`)).map((row) => JSON.stringify(Object.entries(row).sort(([a], [b]) => (a < b ? -1 : 1)))).sort();
  }
  return rows;
}

const seriesIndex = async (url: string) => (await sql(url, `SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'results' AND indexdef LIKE '%md5(query), country, lang, run_id COLLATE "C"%'`)).length;

describePostgres('the PostgreSQL views read what they show', () => {
  it('no view reads the results table whole; the walk answers as the GROUP BY; a table made before the index gets it as a run opens it', async () => {
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
      // Three days' runs: each series has a current and a previous complete run.
      for (const day of [0, 1, 2]) {
        sim.setDay(day);
        expect((await runOn(sim, pipeline)).status).toBe('completed');
      }
      expect(await seriesIndex(db.url)).toBe(1);
      expect(await tableScans(db.url)).toEqual(Object.fromEntries(VIEWS.map((view) => [view, []])));
      const walked = await viewRows(db.url);
      expect(walked.report_rankings?.length).toBe(3 * 3 * 2 * 10);
      expect(walked.report_changes?.length).toBeGreaterThanOrEqual(3 * 3 * 2 * 10);

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

      // The next run opening the table makes the index, and the views walk it again.
      sim.setDay(3);
      expect((await runOn(sim, pipeline)).status).toBe('completed');
      expect(await seriesIndex(db.url)).toBe(1);
      expect(await tableScans(db.url)).toEqual(Object.fromEntries(VIEWS.map((view) => [view, []])));
    } finally {
      await db.drop();
    }
  });
});
