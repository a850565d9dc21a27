import { expect, it } from 'vitest';
import pg from 'pg';
import { createPostgresResultsViews, createPostgresSpendView } from '../../src/analytics/postgres-views.ts';
import { normalize, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { handMadeDatabase } from '../analytics/analytics-fixture.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const VIEWS = ['report_rankings', 'report_domains', 'report_overlap', 'report_changes'];

/** Rows as comparable text, in a stable order: PostgreSQL's timestamps as SQLite's ISO text, `drop` left out. */
function comparable(rows: Record<string, unknown>[], drop: readonly string[] = []): string[] {
  return rows
    .map((row) => JSON.stringify(Object.entries(row).filter(([column]) => !drop.includes(column)).map(([column, value]) => [column, value instanceof Date ? value.toISOString() : value])))
    .sort();
}

describePostgres('the report views in PostgreSQL', () => {
  it('equal SQLite’s row for row on the hand-made dataset, spend included', async () => {
    using dir = workdir();
    const file = dir.path('hand.sqlite');
    handMadeDatabase(file);
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      // The same rows in a PostgreSQL table, and the same ledger in a PostgreSQL state store.
      const rows = sqliteRows(file, 'SELECT * FROM results');
      const columns = Object.keys(rows[0] ?? {});
      const types: Record<string, string> = { page: 'integer', position: 'integer', rank: 'integer' };
      await sql(db.url, `CREATE TABLE results (${columns.map((c) => `"${c}" ${types[c] ?? 'text'}`).join(', ')})`);
      for (const row of rows) await sql(db.url, `INSERT INTO results VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`, Object.values(row));
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'hand' });
      const series = sqliteRows(file, 'SELECT * FROM series');
      for (const s of series) {
        await store.endSeries(String(s.run_id), { seriesId: String(s.series_id), endpoint: String(s.endpoint), query: String(s.query), country: String(s.country), lang: String(s.lang) }, {
          status: 'ended', reason: String(s.reason), nextPage: null, error: null, errorKind: null,
        });
      }
      const spend = sqliteRows(file, 'SELECT * FROM spend ORDER BY id');
      await store.spend(spend.map((r) => ({ runId: String(r.run_id), at: '2026-01-02T00:00:00.000Z', seriesId: String(r.series_id), path: String(r.path), attempt: Number(r.attempt), status: String(r.status), credits: Number(r.credits), uncertain: r.uncertain === 1, latencyMs: Number(r.latency_ms) })));
      await createPostgresResultsViews(pool, 'public', 'results', ['rankings', 'domains', 'overlap', 'changes']);
      await createPostgresSpendView(pool, 'webdata');

      for (const view of VIEWS) {
        const inSqlite = sqliteRows(file, `SELECT * FROM ${view}`);
        expect(inSqlite.length, view).toBeGreaterThan(0);
        expect(comparable(await sql(db.url, `SELECT * FROM public.${view}`)), view).toEqual(comparable(inSqlite));
      }
      // The changes compared include every kind the dataset has: new, lost, up and down.
      expect(new Set(sqliteRows(file, 'SELECT change FROM report_changes').map((r) => r.change))).toEqual(new Set(['new', 'lost', 'up', 'down']));
      expect(comparable(await sql(db.url, 'SELECT * FROM webdata.report_spend'))).toEqual(comparable(sqliteRows(file, 'SELECT * FROM report_spend')));
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('equal SQLite’s row for row after two runs into both, the views made by the runs themselves', async () => {
    await using sim = await simulator({ seed: 9, driftEveryMs: 1 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const pipeline = {
        name: 'both',
        source: searchPages({ queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb', 'de'], maxPages: 2 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('both.sqlite') }), toPostgres({ url: db.url, table: 'results' })],
      };
      await runOn(sim, pipeline);
      await runOn(sim, pipeline);
      for (const view of VIEWS) {
        const inSqlite = sqliteRows(dir.path('both.sqlite'), `SELECT * FROM ${view}`);
        expect(inSqlite.length, view).toBeGreaterThan(0);
        expect(comparable(await sql(db.url, `SELECT * FROM public.${view}`)), view).toEqual(comparable(inSqlite));
      }
    } finally {
      await db.drop();
    }
  });

  it('the spend view of a PostgreSQL state store equals a SQLite one’s for the same run', async () => {
    const db = await testDatabase();
    using dir = workdir();
    try {
      const plan = (state: object, path: string) => ({
        name: 'spend',
        source: searchPages({ queries: ['espresso', 'kettle'], countries: ['us', 'gb'], maxPages: 2 }),
        stages: [normalize()],
        sinks: [toSqlite({ path })],
        state,
      });
      {
        await using sim = await simulator({ seed: 4 });
        sim.inject({ fault: 'status', status: 503, times: 2, match: { q: 'kettle' } });
        await runOn(sim, plan({}, dir.path('a.sqlite')));
      }
      {
        await using sim = await simulator({ seed: 4 });
        sim.inject({ fault: 'status', status: 503, times: 2, match: { q: 'kettle' } });
        await runOn(sim, plan({ url: db.url }, dir.path('b.sqlite')));
      }
      const inSqlite = sqliteRows(dir.path('a.sqlite'), 'SELECT * FROM report_spend');
      expect(inSqlite.some((row) => Number(row.requests) > Number(row.answered))).toBe(true);
      expect(comparable(await sql(db.url, 'SELECT * FROM webdata.report_spend'), ['run_id'])).toEqual(comparable(inSqlite, ['run_id']));
    } finally {
      await db.drop();
    }
  });
});
