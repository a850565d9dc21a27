import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { defineSource, definePipeline, normalize, paginators, type Series, type Source, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { exportReport } from '../../src/analytics/index.ts';
import { handMadeDatabase } from '../analytics/analytics-fixture.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { expectRefused, simulator, thrown } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

/** A column name that is SQL: quoted as `"${name}"` without doubling its quotes, the rest runs as the exporter. */
const SQLITE_HOSTILE = 'run_id", sqlite_version() AS "q';
const POSTGRES_HOSTILE = `run_id", pg_read_file('PG_VERSION') AS "q`;


/** A source of one series whose plan names `tagColumns`, and which never gets to send anything if they are refused. */
function taggedSource(tagColumns: readonly string[]): Source {
  const series: Series = { id: 'one', endpoint: '/searchengine/search', query: 'espresso', country: 'us', lang: 'en', tags: Object.fromEntries(tagColumns.map((c) => [c, 'v'])) };
  return defineSource({
    endpoint: '/searchengine/search',
    series: () => [series],
    paginator: paginators.pageNumber(),
    maxPages: 1,
    tagColumns,
    async fetch(_series, request, { client, signal }) {
      const response = await client.request<{ data: Record<string, unknown>[] }>({ path: '/searchengine/search', query: { q: 'espresso', country: 'us', ...(request.params as Record<string, string>) } }, { signal });
      return { ...response, items: response.body.data };
    },
  });
}

describe('identifiers are quoted by doubling their quotes: a name is only ever a name', () => {
  it('export --report items: a column named with SQL is exported as a column of that name, the SQL never runs (SQLite)', async () => {
    using dir = workdir();
    const path = dir.path('hand.sqlite');
    handMadeDatabase(path);
    const db = new Database(path);
    db.exec(`ALTER TABLE results ADD COLUMN "${SQLITE_HOSTILE.replaceAll('"', '""')}" TEXT`);
    db.prepare(`UPDATE results SET "${SQLITE_HOSTILE.replaceAll('"', '""')}" = 'stored'`).run();
    const columns = (db.pragma('table_info(results)') as { name: string }[]).map((c) => c.name);
    db.close();
    expect(columns).toContain(SQLITE_HOSTILE);

    const result = await cli(['export', 'hand.sqlite', '--report', 'items', '--format', 'jsonl'], { cwd: dir.dir });
    expect(result.code, result.stderr).toBe(0);
    const rows = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(rows).toHaveLength(11);
    for (const row of rows) {
      // Exactly the table's columns: no `q` holding what sqlite_version() gave.
      expect(Object.keys(row)).toEqual(columns);
      expect(row[SQLITE_HOSTILE]).toBe('stored');
    }
    const csv = await cli(['export', 'hand.sqlite', '--report', 'items'], { cwd: dir.dir });
    expect(csv.code, csv.stderr).toBe(0);
    expect(csv.stdout.split('\r\n')[0]).toContain('"run_id"", sqlite_version() AS ""q"');
  });

  it("a source's tag columns are column names, and none of the normalized columns: anything else is refused, naming source.tagColumns", async () => {
    for (const [tags, field, reason] of [
      [['x" TEXT); DROP TABLE results; --'], 'source.tagColumns.0', /column name/],
      [['category', 'Category'], 'source.tagColumns.1', /twice/],
      [['Query'], 'source.tagColumns.0', /normalized item.*tag_query/],
      [['a'.repeat(64)], 'source.tagColumns.0', /column name/],
    ] as const) {
      expectRefused(await thrown(() => taggedSource(tags)), field, reason);
    }
  });

  it('a source of its own whose plan names a tag column that is not a column name: refused before any output is opened (exit 2), nothing sent', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const good = taggedSource(['category']);
    // Past defineSource's check: a Source is an interface, and a plan may say anything.
    const source: Source = { plan: () => ({ ...good.plan(), tagColumns: ['x" TEXT, "y'] }), pages: (ctx) => good.pages(ctx) };
    const error = await runOn(sim, { name: 'own-plan', source, stages: [normalize()], sinks: [toSqlite({ path: dir.path('o.sqlite') })] }).catch((e: unknown) => e);
    expectRefused(error, 'source.tagColumns.0', /column name/);
    expect(sim.stats().requests).toBe(0);
  });
});

describe('names upsert keeps for itself are refused as tag columns (exit 2, before any request)', () => {
  it('SQLite: a query file with a first_seen, last_seen or first_run_id column and an upsert sink', async () => {
    await using sim = await simulator();
    using dir = workdir();
    for (const reserved of ['first_seen', 'last_seen', 'first_run_id']) {
      writeFileSync(dir.path('keywords.csv'), `query,${reserved}\r\nespresso,a\r\n`);
      const file = config(dir.dir, { sinks: [{ type: 'sqlite', path: 'out/results.sqlite', mode: 'upsert' }] }, { queries: [], queriesFile: 'keywords.csv' });
      const result = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect([reserved, result.code], result.stderr).toEqual([reserved, 2]);
      expect(result.stderr).toContain('sqlite.mode');
      expect(result.stderr).toContain(`the tag column ${reserved}`);
    }
    expect(sim.stats().requests).toBe(0);
    // In append mode the same column is a tag like any other.
    const file = config(dir.dir, { sinks: [{ type: 'sqlite', path: 'out/append.sqlite' }] }, { queries: [], queriesFile: 'keywords.csv', maxPages: 1 });
    const appended = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(appended.code, appended.stderr).toBe(0);
    const db = new Database(dir.path('out/append.sqlite'), { readonly: true });
    expect(db.prepare('SELECT DISTINCT first_run_id FROM results').all()).toEqual([{ first_run_id: 'a' }]);
    db.close();
  });

  it("a sink's own columns in upsert mode: first_seen, last_seen and first_run_id are refused, naming columns", async () => {
    const columns = ['query', 'country', 'lang', 'dedupe_key', 'last_seen'];
    expectRefused(await thrown(() => toSqlite({ path: 'x.sqlite', mode: 'upsert', columns })), 'sqlite.columns', /last_seen.*upsert/);
  });
});

describePostgres('identifiers in PostgreSQL', () => {
  it('export --report items: a column named with SQL is a column, pg_read_file never runs', async () => {
    using dir = workdir();
    const db = await testDatabase();
    try {
      const quoted = `"${POSTGRES_HOSTILE.replaceAll('"', '""')}"`;
      await sql(db.url, `CREATE TABLE results (run_id text, query text, country text, lang text, page integer, position integer, ${quoted} text)`);
      await sql(db.url, `INSERT INTO results VALUES ('r1', 'q', 'us', 'en', 1, 1, 'stored'), ('r1', 'q', 'us', 'en', 1, 2, 'stored')`);
      const out = dir.path('items.jsonl');
      expect(await exportReport({ database: db.url, report: 'items', format: 'jsonl', out })).toEqual({ rows: 2 });
      const result = await cli(['export', db.url, '--report', 'items', '--format', 'jsonl'], { cwd: dir.dir });
      expect(result.code, result.stderr).toBe(0);
      for (const line of result.stdout.trim().split('\n')) {
        const row = JSON.parse(line) as Record<string, unknown>;
        expect(Object.keys(row)).toEqual(['run_id', 'query', 'country', 'lang', 'page', 'position', POSTGRES_HOSTILE]);
        expect(row[POSTGRES_HOSTILE]).toBe('stored');
      }
    } finally {
      await db.drop();
    }
  });

  it('a table name leaves room for the names made from it (views, indexes): at most 47 characters, so none is cut at 63 bytes', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      expectRefused(await thrown(() => toPostgres({ url: db.url, table: 'a'.repeat(48) })), 'postgres.table', /at most 47/);
      // From the command line, a name of 55 (whose views were cut to the same name): exit 2, nothing sent.
      const file = config(dir.dir, { sinks: [{ type: 'postgres', url: db.url, table: 't'.repeat(55) }] });
      const refused = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(/sinks\.0\.table: .*at most 47/);
      expect(sim.stats().requests).toBe(0);

      // 47 runs, and every view has its whole name.
      const table = 'b'.repeat(47);
      const summary = await runOn(sim, {
        name: 'long-table',
        source: searchPages({ queries: ['espresso'], countries: ['us', 'gb'], maxPages: 1 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table })],
      });
      expect(summary.status).toBe('completed');
      const views = await sql(db.url, `SELECT viewname FROM pg_views WHERE schemaname = 'public' ORDER BY viewname`);
      expect(views.map((v) => v.viewname)).toEqual(['changes', 'domains', 'overlap', 'rankings'].map((v) => `${table}_report_${v}`));
      const exported = await cli(['export', db.url, '--report', 'rankings', '--table', table, '--format', 'jsonl'], { cwd: dir.dir });
      expect(exported.code, exported.stderr).toBe(0);
      expect(exported.stdout.trim().split('\n').length).toBe(summary.items.written);
    } finally {
      await db.drop();
    }
  });

  it("the state schema leaves room for pg-boss's (<schema>_jobs, 50 bytes at most): at most 45 characters, and a distributed run on 45 has both", async () => {
    await using sim = await simulator();
    const db = await testDatabase();
    try {
      const pipeline = (schema: string) => ({
        name: 'long-schema',
        source: searchPages({ queries: ['espresso'], countries: ['us'], maxPages: 1 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'r' })],
        state: { url: db.url, schema },
      });
      expectRefused(await thrown(() => definePipeline(pipeline('s'.repeat(46)))), 'state.schema', /at most 45/);
      const schema = 's'.repeat(45);
      expect((await runOn(sim, pipeline(schema))).status).toBe('completed');
      const schemas = await sql(db.url, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'sss%' ORDER BY nspname`);
      expect(schemas.map((n) => n.nspname)).toEqual([schema, `${schema}_jobs`]);
    } finally {
      await db.drop();
    }
  });

  it('PostgreSQL: a query file with a first_seen column and an upsert sink is refused (exit 2), nothing sent', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      writeFileSync(dir.path('keywords.csv'), 'query,first_seen\r\nespresso,a\r\n');
      const file = config(dir.dir, { sinks: [{ type: 'postgres', url: db.url, table: 'results', mode: 'upsert' }] }, { queries: [], queriesFile: 'keywords.csv' });
      const result = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain('postgres.mode');
      expect(result.stderr).toContain('the tag column first_seen');
      expect(sim.stats().requests).toBe(0);
      expectRefused(
        await thrown(() => toPostgres({ url: db.url, table: 'r', mode: 'upsert', columns: ['query', 'country', 'lang', 'dedupe_key', 'first_run_id'] })),
        'postgres.columns',
        /first_run_id.*upsert/,
      );
    } finally {
      await db.drop();
    }
  });
});
