import { existsSync, writeFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { dedupe, normalize, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

/** Rows as comparable text, whichever database they came from: the columns that do not vary between runs. */
const STABLE = ['query', 'country', 'lang', 'page', 'position', 'rank', 'title', 'url', 'domain', 'snippet', 'dedupe_key'];
const stable = (list: Record<string, unknown>[]) =>
  list.map((row) => JSON.stringify([...STABLE.map((c) => row[c] ?? null), sortedKeys(typeof row.raw === 'string' ? JSON.parse(row.raw) : row.raw)])).sort();

/** jsonb keeps a value, not its text: keys come back in its own order. */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, sortedKeys(v)]));
}

const plan = (sinks: unknown[], extra: Record<string, unknown> = {}) => ({
  name: 'pg-sink',
  source: searchPages({ queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 3 }),
  stages: [normalize(), dedupe()],
  sinks: sinks as never,
  ...extra,
});

describePostgres('the PostgreSQL sink', () => {
  it('writes the same rows as the SQLite sink, in typed columns (integer, timestamptz, jsonb)', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const summary = await runOn(sim, plan([toSqlite({ path: dir.path('out.sqlite') }), toPostgres({ url: db.url, table: 'results' })]));
      expect(summary.status).toBe('completed');
      const inPostgres = await sql(db.url, 'SELECT * FROM public.results');
      expect(inPostgres).toHaveLength(summary.items.written);
      expect(stable(inPostgres)).toEqual(stable(sqliteRows(dir.path('out.sqlite'))));
      const types = await sql(db.url, `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'results' ORDER BY ordinal_position`);
      expect(Object.fromEntries(types.map((t) => [t.column_name, t.data_type]))).toMatchObject({
        page: 'integer',
        position: 'integer',
        rank: 'integer',
        title: 'text',
        fetched_at: 'timestamp with time zone',
        raw: 'jsonb',
      });
      // The sink's checkpoint lives beside its table, in the same database.
      expect(await sql(db.url, 'SELECT pipeline, seq::int AS seq FROM public.webdata_checkpoints')).toEqual([{ pipeline: 'pg-sink', seq: summary.pages.fetched }]);
    } finally {
      await db.drop();
    }
  });

  it('a page the stages emptied, into a table outside the state store: its checkpoint moves, with no rows', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      // A stage may empty a page (it must still yield it): the sink then writes the checkpoint alone.
      const emptySecondPages = async function* (pages: AsyncIterable<{ number: number; items: unknown[] }>) {
        for await (const page of pages) yield page.number === 2 ? { ...page, items: [] } : page;
      };
      const summary = await runOn(sim, { ...plan([toSqlite({ path: dir.path('out.sqlite') }), toPostgres({ url: db.url, table: 'results' })]), stages: [normalize(), emptySecondPages] as never });
      expect(summary.status).toBe('completed');
      expect(await sql(db.url, 'SELECT DISTINCT page FROM public.results ORDER BY page')).toEqual([{ page: 1 }, { page: 3 }]);
      expect(await sql(db.url, 'SELECT seq::int AS seq FROM public.webdata_checkpoints')).toEqual([{ seq: summary.pages.fetched }]);
    } finally {
      await db.drop();
    }
  });

  it('with the state store in the same database, a page’s rows, checkpoint and journal commit in one transaction: no journal entry is needed', async () => {
    await using sim = await simulator({ seed: 5 });
    const db = await testDatabase();
    try {
      const summary = await runOn(sim, plan([toPostgres({ url: db.url, table: 'results' })], { state: { url: db.url, journal: 'prune' } }));
      expect(summary.status).toBe('completed');
      expect(await sql(db.url, 'SELECT COUNT(*)::int AS n FROM public.results')).toEqual([{ n: summary.items.written }]);
      expect(await sql(db.url, 'SELECT status FROM webdata.runs')).toEqual([{ status: 'completed' }]);
      // Written inside the state store's transaction, so never journaled for it.
      expect(await sql(db.url, 'SELECT COUNT(*)::int AS n FROM webdata.pages')).toEqual([{ n: 0 }]);
      expect(await sql(db.url, 'SELECT seq::int AS seq FROM webdata.pipelines')).toEqual([{ seq: summary.pages.fetched }]);
    } finally {
      await db.drop();
    }
  });

  it('upsert keeps one row per key with first and last seen; replace keeps the latest finished run; tag columns are added', async () => {
    await using sim = await simulator({ seed: 5 });
    const db = await testDatabase();
    try {
      const upsert = () => runOn(sim, plan([toPostgres({ url: db.url, table: 'u', mode: 'upsert' })], { name: 'pg-upsert' }));
      const first = await upsert();
      const second = await upsert();
      // With no SQLite file named, the run state went to the first PostgreSQL sink's database (and no file was made).
      expect(await sql(db.url, `SELECT run_id FROM webdata.runs WHERE pipeline = 'pg-upsert' ORDER BY created`)).toEqual([{ run_id: first.runId }, { run_id: second.runId }]);
      expect(existsSync('postgres:')).toBe(false);
      const keyed = await sql(db.url, 'SELECT COUNT(*)::int AS n, COUNT(DISTINCT (query, country, lang, dedupe_key))::int AS keys FROM u WHERE dedupe_key IS NOT NULL');
      expect(keyed[0]?.n).toBe(keyed[0]?.keys);
      const row = (await sql(db.url, `SELECT run_id, first_run_id, first_seen < last_seen AS later, last_seen = fetched_at AS same FROM u LIMIT 1`))[0];
      expect(row).toEqual({ run_id: second.runId, first_run_id: first.runId, later: true, same: true });

      const replace = () => runOn(sim, plan([toPostgres({ url: db.url, table: 'r', mode: 'replace' })], { name: 'pg-replace' }));
      await replace();
      const latest = await replace();
      expect(await sql(db.url, 'SELECT DISTINCT run_id FROM r')).toEqual([{ run_id: latest.runId }]);

      // A query list with tag columns, into a table made without them: the columns are added, empty for earlier rows.
      using dir = workdir();
      writeFileSync(dir.path('keywords.csv'), 'keyword,category\nespresso,kitchen\n');
      await runOn(sim, {
        name: 'pg-replace',
        source: searchPages({ queriesFile: dir.path('keywords.csv'), countries: ['us'], maxPages: 1 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'r' })],
      });
      expect(await sql(db.url, 'SELECT category, COUNT(*)::int AS n FROM r GROUP BY category ORDER BY category')).toEqual([
        { category: 'kitchen', n: 10 },
        { category: null, n: latest.items.written },
      ]);
    } finally {
      await db.drop();
    }
  });

  it('many tables in the state store’s database: each sink’s lease takes a connection of its own, not one of the run’s pool', async () => {
    await using sim = await simulator({ seed: 5 });
    const db = await testDatabase();
    try {
      const tables = ['t1', 't2', 't3', 't4', 't5'];
      const summary = await runOn(sim, plan(tables.map((table) => toPostgres({ url: db.url, table })), { name: 'pg-many' }));
      expect(summary.status).toBe('completed');
      for (const table of tables) expect(await sql(db.url, `SELECT COUNT(*)::int AS n FROM ${table}`)).toEqual([{ n: summary.items.written }]);
    } finally {
      await db.drop();
    }
  });

  it('wider dedupe with the state in PostgreSQL (keys looked up there, written with their page) keeps what SQLite keeps', async () => {
    await using sim = await simulator({ seed: 5, latencyMs: 0 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      // Countries share most results: with global dedupe, most of each later series' items are duplicates.
      const pipeline = (name: string, state: object, sink: unknown) => ({
        name,
        source: searchPages({ queries: ['espresso', 'kettle'], countries: ['us', 'gb', 'de', 'fr'], maxPages: 3 }),
        stages: [normalize(), dedupe({ scope: 'global' })],
        sinks: [sink] as never,
        rate: { concurrency: 4 },
        state,
      });
      const inSqlite = await runOn(sim, pipeline('global-sqlite', {}, toSqlite({ path: dir.path('g.sqlite') })));
      const inPostgres = await runOn(sim, pipeline('global-pg', { url: db.url }, toPostgres({ url: db.url, table: 'g' })));
      expect(inSqlite.items.duplicates).toBeGreaterThan(0);
      expect(inPostgres.items).toEqual(inSqlite.items);
      const keys = (list: Record<string, unknown>[]) => list.map((row) => String(row.dedupe_key)).sort();
      expect(keys(await sql(db.url, 'SELECT dedupe_key FROM g'))).toEqual(keys(sqliteRows(dir.path('g.sqlite'))));
    } finally {
      await db.drop();
    }
  });

  it('refuses a password in its URL, and bad names, before anything runs', () => {
    expect(() => toPostgres({ url: 'postgres://me:secret@db.example/x', table: 'results' })).toThrow(/postgres.url: must not carry a password .*PGPASSWORD/s);
    expect(() => toPostgres({ table: 'Results; DROP TABLE x' })).toThrow(/postgres.table: must be a PostgreSQL name/);
    expect(() => toPostgres({ table: 'ok', schema: 'a"b' })).toThrow(/postgres.schema/);
  });
});
