// Tracked domains beside a PostgreSQL results table (issue 42, item 1): `<table>_tracked` and `report_tracked` as in
// SQLite, row for row, from the same runs; a replace table keeps only its latest run's, as its outcomes.
import { expect, it } from 'vitest';
import { normalize, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const sorted = (rows: Record<string, unknown>[]) => rows.map((row) => JSON.stringify(row)).sort();

describePostgres('tracked domains in PostgreSQL', () => {
  it('the _tracked table and report_tracked equal SQLite’s after two runs on two days; replace keeps the latest run’s', async () => {
    await using sim = await simulator({ seed: 11, day: 4 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const truth = sim.ranking({ q: 'espresso', country: 'us', lang: 'en' });
      const tracked = [truth[12]?.domain as string, 'never-ranked.example'];
      const pipeline = {
        name: 'tracked-both',
        source: searchPages({ queries: ['espresso', 'teapot'], countries: ['us'], langs: ['en'], maxPages: 3 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('both.sqlite') }), toPostgres({ url: db.url, table: 'results' }), toPostgres({ url: db.url, table: 'latest', mode: 'replace' })],
        track: { domains: tracked },
        refresh: { depth: 'until-found' as const, margin: 1 },
      };
      const first = await runOn(sim, pipeline);
      sim.setDay(9);
      const second = await runOn(sim, pipeline);
      const inSqlite = sqliteRows(dir.path('both.sqlite'), 'SELECT * FROM results_tracked');
      expect(inSqlite).toHaveLength(8);
      expect(sorted(await sql(db.url, 'SELECT * FROM public.results_tracked'))).toEqual(sorted(inSqlite));
      const view = sqliteRows(dir.path('both.sqlite'), 'SELECT * FROM report_tracked');
      expect(view.filter((row) => row.domain === 'never-ranked.example').map((row) => row.position)).toEqual(['not found within 30', 'not found within 30', 'not found within 30', 'not found within 30']);
      expect(sorted(await sql(db.url, 'SELECT * FROM public.report_tracked'))).toEqual(sorted(view));
      // replace: the rows of earlier runs give way to the latest one's, and so do their tracked ranks.
      expect(new Set((await sql(db.url, 'SELECT run_id FROM public.latest_tracked')).map((row) => row.run_id))).toEqual(new Set([second.runId]));
      expect(new Set(inSqlite.map((row) => row.run_id))).toEqual(new Set([first.runId, second.runId]));
    } finally {
      await db.drop();
    }
  });
});
