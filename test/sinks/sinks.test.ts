import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, searchPages, toCsv, toSqlite, ValidationError } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { csvRows, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

describe('sinks', () => {
  it('SQLite: WAL, schema version, explicit columns and indexes', async () => {
    await using sim = await simulator();
    using dir = workdir();
    await runOn(sim, { name: 'sqlite', source: searchPages({ queries: ['x'], maxPages: 1 }), stages: [normalize()], sinks: [toSqlite({ path: dir.path('s.sqlite'), table: 'serp' })] });
    const [mode] = sqliteRows(dir.path('s.sqlite'), 'PRAGMA journal_mode');
    expect(mode).toEqual({ journal_mode: 'wal' });
    expect(sqliteRows(dir.path('s.sqlite'), 'PRAGMA user_version')).toEqual([{ user_version: 2 }]);
    // Beside the table, how each series ended in each run (docs/analytics.md#failed-and-unreached-series).
    expect(sqliteRows(dir.path('s.sqlite'), 'SELECT query, country, lang, complete, reason FROM serp_outcomes')).toEqual([{ query: 'x', country: '', lang: '', complete: 1, reason: 'max_pages' }]);
    const columns = sqliteRows(dir.path('s.sqlite'), "SELECT name, type, \"notnull\" FROM pragma_table_info('serp')");
    expect(columns.map((c) => c.name)).toEqual(['run_id', 'query', 'country', 'lang', 'page', 'position', 'rank', 'title', 'url', 'domain', 'snippet', 'dedupe_key', 'fetched_at', 'raw']);
    expect(columns.find((c) => c.name === 'title')).toEqual({ name: 'title', type: 'TEXT', notnull: 0 });
    expect(columns.find((c) => c.name === 'page')).toEqual({ name: 'page', type: 'INTEGER', notnull: 1 });
    const indexes = sqliteRows(dir.path('s.sqlite'), "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'serp' ORDER BY name").map((r) => r.name);
    expect(indexes).toEqual(['serp_dedupe_key', 'serp_series']);
    expect(sqliteRows(dir.path('s.sqlite'), "SELECT name FROM pragma_index_info('serp_series')").map((r) => r.name)).toEqual(['query', 'country', 'lang', 'run_id']);
    expect(() => toSqlite({ path: 'x.sqlite', table: 'runs' })).toThrow(/sqlite.table/);
    expect(() => toSqlite({ path: 'x.sqlite', table: 'drop table;' })).toThrow(/column name/);
  });

  it('CSV: one header across runs, formulas escaped, BOM on request, a different header refused before any request', async () => {
    await using sim = await simulator();
    using dir = workdir();
    sim.inject({ fault: 'status', status: 200, body: { data: [{ title: '=HYPERLINK("http://evil")', url: 'https://a.example/', snippet: '+1 great' }] } });
    const pipeline = (name: string, sink: ReturnType<typeof toCsv>) =>
      definePipeline({ name, source: searchPages({ queries: ['x'], maxPages: 1 }), stages: [normalize()], sinks: [sink] });
    await runOn(sim, pipeline('csv', toCsv({ path: dir.path('c.csv'), bom: true })));
    await runOn(sim, pipeline('csv', toCsv({ path: dir.path('c.csv'), bom: true })));
    const text = readFileSync(dir.path('c.csv'), 'utf8');
    expect(text.startsWith('\uFEFFrun_id,')).toBe(true);
    expect(text.match(/run_id,query/g)).toHaveLength(1);
    expect(text.match(/\uFEFF/g)).toHaveLength(1);
    expect(text).toContain('\r\n');
    const rows = csvRows(dir.path('c.csv'));
    expect(rows).toHaveLength(2);
    expect(rows[0]?.title).toBe(`'=HYPERLINK("http://evil")`);
    expect(rows[0]?.snippet).toBe(`'+1 great`);

    await runOn(sim, pipeline('raw', toCsv({ path: dir.path('raw.csv'), escapeFormulas: false })));
    expect(csvRows(dir.path('raw.csv'))[0]?.title).toBe('=HYPERLINK("http://evil")');

    writeFileSync(dir.path('other.csv'), 'a,b,c\r\n1,2,3\r\n');
    const before = sim.stats().requests;
    const error = await runOn(sim, pipeline('other', toCsv({ path: dir.path('other.csv') }))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(String(error)).toContain('csv.columns');
    expect(sim.stats().requests).toBe(before);
    expect(readFileSync(dir.path('other.csv'), 'utf8')).toBe('a,b,c\r\n1,2,3\r\n');
  });

  it('a sink with default columns given raw items says to add normalize()', async () => {
    await using sim = await simulator();
    using dir = workdir();
    for (const sink of [toSqlite({ path: dir.path('raw.sqlite') }), toCsv({ path: dir.path('raw.csv') })]) {
      const error = await runOn(sim, { name: 'raw', source: searchPages({ queries: ['x'], maxPages: 1 }), sinks: [sink] }).catch((e: unknown) => e);
      expect(String(error)).toContain('add normalize() to the stages');
    }
  });

  it('several sinks at once receive the same pages', async () => {
    await using sim = await simulator();
    using dir = workdir();
    await runOn(sim, {
      name: 'many',
      source: searchPages({ queries: ['x', 'y'], maxPages: 2 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('a.sqlite') }), toSqlite({ path: dir.path('a.sqlite'), table: 'copy' }), toCsv({ path: dir.path('a.csv') })],
    });
    const a = sqliteRows(dir.path('a.sqlite'));
    const b = sqliteRows(dir.path('a.sqlite'), 'SELECT * FROM copy ORDER BY rowid');
    expect(b).toEqual(a);
    expect(csvRows(dir.path('a.csv'))).toHaveLength(a.length);
  });
});
