// A worker joining a run (or any run opening) found its views current and left them as they were: it dropped and
// re-created the results' and the spend views under a lock each time (docs/benchmarks.md's start-up: 130-300 ms of a
// joiner's). Over a real cluster: two runs into one table, then the views' OIDs and what the second sent; and views
// made again where they no longer follow the table (a tag column added, a view replaced by someone else, another set).
import { expect, it } from 'vitest';
import pg from 'pg';
import { createPostgresResultsViews, createPostgresSpendView } from '../../src/analytics/postgres-views.ts';
import { normalize, type PipelineDefinition, searchPages, toPostgres } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { runOn } from '../pipeline-helpers.ts';
import { describePostgres, spiedStatements, sql, testDatabase } from './pg.ts';

const viewOids = async (url: string) =>
  Object.fromEntries(
    (await sql(url, `SELECT n.nspname || '.' || c.relname AS name, c.oid::bigint::text AS oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'v' AND n.nspname IN ('public', 'webdata') ORDER BY 1`)).map((row) => [row.name, row.oid]),
  );

describePostgres('the analytics views, kept when current', () => {
  it('a second run into the same table and state leaves every view as the first made it (the same OIDs), and sends no DDL for them', async () => {
    await using sim = await simulator({ seed: 5 });
    const db = await testDatabase();
    try {
      const pipeline: PipelineDefinition = {
        name: 'kept',
        source: searchPages({ queries: ['espresso', 'kettle'], countries: ['us'], maxPages: 1 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'results' })],
        state: { url: db.url },
      };
      expect((await runOn(sim, pipeline)).status).toBe('completed');
      const first = await viewOids(db.url);
      expect(Object.keys(first)).toEqual(['public.report_changes', 'public.report_domains', 'public.report_overlap', 'public.report_rankings', 'webdata.report_spend', 'webdata.webdata_spend']);
      expect((await runOn(sim, pipeline)).status).toBe('completed');
      expect(await viewOids(db.url)).toEqual(first);
      // As a joiner opens them: nothing but reads.
      const pool = new pg.Pool({ connectionString: db.url, max: 2 });
      const sent = spiedStatements(pool);
      try {
        await createPostgresResultsViews(pool, 'public', 'results', ['rankings', 'domains', 'overlap', 'changes']);
        await createPostgresSpendView(pool, 'webdata');
      } finally {
        await pool.end();
      }
      expect(sent.length).toBeGreaterThan(0);
      expect(sent.filter((text) => /advisory|^\s*(BEGIN|CREATE|DROP|COMMENT)\b/i.test(text))).toEqual([]);
      expect(await viewOids(db.url)).toEqual(first);
      // And they still read the table.
      expect((await sql(db.url, 'SELECT count(*)::int AS n FROM public.report_rankings'))[0]?.n).toBeGreaterThan(0);
    } finally {
      await db.drop();
    }
  });

  it('views no longer true to the table are made again: a tag column added, a view replaced by someone else, another set of views', async () => {
    await using sim = await simulator({ seed: 6 });
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const pipeline = { name: 'changed', source: searchPages({ queries: ['espresso'], countries: ['us'], maxPages: 1 }), stages: [normalize()], sinks: [toPostgres({ url: db.url, table: 'results' })] };
      expect((await runOn(sim, pipeline)).status).toBe('completed');
      const all = ['rankings', 'domains', 'overlap', 'changes'] as const;
      await createPostgresResultsViews(pool, 'public', 'results', all);
      const made = await viewOids(db.url);
      await createPostgresResultsViews(pool, 'public', 'results', all);
      expect(await viewOids(db.url)).toEqual(made);

      // A tag column: rankings and changes carry it.
      await sql(db.url, 'ALTER TABLE public.results ADD COLUMN category text');
      await createPostgresResultsViews(pool, 'public', 'results', all);
      const tagged = await viewOids(db.url);
      expect(tagged['public.report_rankings']).not.toBe(made['public.report_rankings']);
      const columns = async (view: string) => (await sql(db.url, `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1`, [view])).map((row) => row.column_name);
      expect(await columns('report_rankings')).toContain('category');
      expect(await columns('report_changes')).toContain('category');

      // Replaced by someone else (its comment kept by CREATE OR REPLACE): made again as ours.
      await sql(db.url, `CREATE OR REPLACE VIEW public.report_domains AS SELECT * FROM (${(await sql(db.url, `SELECT pg_get_viewdef('public.report_domains'::regclass) AS d`))[0]?.d}) mine WHERE false`.replace(/;\s*\)/, ')'));
      expect(await sql(db.url, 'SELECT count(*)::int AS n FROM public.report_domains')).toEqual([{ n: 0 }]);
      const replaced = (await viewOids(db.url))['public.report_domains'];
      await createPostgresResultsViews(pool, 'public', 'results', all);
      expect((await viewOids(db.url))['public.report_domains']).not.toBe(replaced);
      expect((await sql(db.url, `SELECT pg_get_viewdef('public.report_domains'::regclass) AS d`))[0]?.d).not.toMatch(/WHERE false/);

      // Another set (a table written in `replace` mode has no changes view).
      await createPostgresResultsViews(pool, 'public', 'results', ['rankings', 'domains', 'overlap'], 'replace');
      expect(Object.keys(await viewOids(db.url)).filter((name) => name.startsWith('public.'))).toEqual(['public.report_domains', 'public.report_overlap', 'public.report_rankings']);
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('six openings at once, round after round, of views gone stale (a tag column added, a mark taken away) all succeed and leave them marked and current: a seventh changes nothing', async () => {
    await using sim = await simulator({ seed: 7 });
    const db = await testDatabase();
    const pools = Array.from({ length: 7 }, () => new pg.Pool({ connectionString: db.url, max: 2 }));
    try {
      const pipeline = { name: 'together', source: searchPages({ queries: ['kettle'], countries: ['us'], maxPages: 1 }), stages: [normalize()], sinks: [toPostgres({ url: db.url, table: 'results' })] };
      expect((await runOn(sim, pipeline)).status).toBe('completed');
      const all = ['rankings', 'domains', 'overlap', 'changes'] as const;
      // A reader of the views' definitions (pg_get_viewdef locks each view in turn) deadlocked with a run re-creating
      // them: the check reads catalog rows alone.
      for (let round = 0; round < 12; round++) {
        await sql(db.url, round % 2 === 0 ? `ALTER TABLE public.results ADD COLUMN tag_${round} text` : 'COMMENT ON VIEW public.report_rankings IS NULL; COMMENT ON VIEW public.report_changes IS NULL');
        const opened = await Promise.allSettled(pools.slice(0, 6).map((pool) => createPostgresResultsViews(pool, 'public', 'results', all)));
        expect(opened.filter((each) => each.status === 'rejected').map((each) => String((each as PromiseRejectedResult).reason))).toEqual([]);
        expect(await sql(db.url, `SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'v' AND obj_description(c.oid, 'pg_class') LIKE 'webdata-etl %'`)).toEqual([{ n: 4 }]);
      }
      const after = await viewOids(db.url);
      await createPostgresResultsViews(pools[6] as pg.Pool, 'public', 'results', all);
      expect(await viewOids(db.url)).toEqual(after);
      const columns = (await sql(db.url, `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'report_rankings'`)).map((row) => row.column_name);
      expect(columns).toEqual(expect.arrayContaining(['tag_0', 'tag_2', 'tag_4']));
      expect((await sql(db.url, 'SELECT count(*)::int AS n FROM public.report_changes'))[0]?.n).toBeGreaterThan(0);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
      await db.drop();
    }
  });
});
