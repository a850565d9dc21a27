import { spawn } from 'node:child_process';
import { openAsBlob, readFileSync } from 'node:fs';
import { tableFromIPC } from 'apache-arrow';
import { parse } from 'csv-parse/sync';
import * as parquet from 'parquet-wasm';
import { describe, expect, it } from 'vitest';
import { dedupe, normalize, searchPages, toSqlite } from '../../src/index.ts';
import { exportReport } from '../../src/analytics/index.ts';
import { handMadeDatabase } from './analytics-fixture.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

describe('analytics views, computed by hand', () => {
  it('rankings, domains, overlap, changes and spend', () => {
    using dir = workdir();
    const path = dir.path('hand.sqlite');
    handMadeDatabase(path);
    expect(sqliteRows(path, 'SELECT country, rank, dedupe_key FROM report_rankings ORDER BY country, rank').map((r) => `${r.country}${r.rank}${String(r.dedupe_key).slice(-1)}`)).toEqual([
      'gb1d',
      'gb2a',
      'gb3b',
      'us1b',
      'us2a',
      'us3e',
    ]);
    expect(sqliteRows(path, 'SELECT country, domain, results, best_rank, average_rank, share FROM report_domains ORDER BY country, domain')).toEqual([
      { country: 'gb', domain: 'x.com', results: 2, best_rank: 2, average_rank: 2.5, share: 0.6667 },
      { country: 'gb', domain: 'y.com', results: 1, best_rank: 1, average_rank: 1, share: 0.3333 },
      { country: 'us', domain: 'x.com', results: 2, best_rank: 1, average_rank: 1.5, share: 0.6667 },
      { country: 'us', domain: 'z.com', results: 1, best_rank: 3, average_rank: 3, share: 0.3333 },
    ]);
    // us {a, b, e} and gb {a, b, d}: 2 shared of 4 distinct.
    expect(sqliteRows(path, 'SELECT * FROM report_overlap')).toEqual([{ query: 'q', lang: 'en', country_a: 'gb', country_b: 'us', shared: 2, top_a: 3, top_b: 3, jaccard: 0.5 }]);
    const changes = sqliteRows(path, 'SELECT country, dedupe_key, previous_rank, current_rank, rank_delta, change FROM report_changes ORDER BY country, dedupe_key');
    expect(changes.map((r) => [r.country, String(r.dedupe_key).slice(-1), r.previous_rank, r.current_rank, r.rank_delta, r.change])).toEqual([
      ['gb', 'a', 1, 2, -1, 'down'],
      ['gb', 'b', null, 3, null, 'new'],
      ['gb', 'd', 2, 1, 1, 'up'],
      ['us', 'a', 1, 2, -1, 'down'],
      ['us', 'b', 2, 1, 1, 'up'],
      ['us', 'c', 3, null, null, 'lost'],
      ['us', 'e', null, 3, null, 'new'],
    ]);
    expect(sqliteRows(path, 'SELECT query, country, requests, answered, credits, uncertain_credits FROM report_spend ORDER BY country')).toEqual([
      { query: 'q', country: 'gb', requests: 2, answered: 1, credits: 2, uncertain_credits: 1 },
      { query: 'q', country: 'us', requests: 2, answered: 1, credits: 1, uncertain_credits: 0 },
    ]);
  });
});

describe('exports', () => {
  it('CSV and JSON Lines read back equal the view; Parquet read back by an independent reader equals it too, typed', async () => {
    using dir = workdir();
    const path = dir.path('hand.sqlite');
    handMadeDatabase(path);
    for (const report of ['rankings', 'domains', 'overlap', 'changes', 'spend', 'items'] as const) {
      const view = report === 'items' ? 'results' : `report_${report}`;
      const expected = sqliteRows(path, `SELECT * FROM ${view}`);
      const sortKey = (row: Record<string, unknown>) => JSON.stringify(Object.keys(row).sort().map((k) => row[k]));
      const same = (rows: Record<string, unknown>[]) => expect(rows.map(sortKey).sort()).toEqual(expected.map(sortKey).sort());

      await exportReport({ database: path, report, format: 'csv', out: dir.path(`${report}.csv`) });
      const csv = parse(readFileSync(dir.path(`${report}.csv`)), { columns: true, record_delimiter: '\r\n', cast: (value, context) => (value === '' ? null : typeof expected[0]?.[String(context.column)] === 'number' ? Number(value) : value) });
      same(csv as Record<string, unknown>[]);

      await exportReport({ database: path, report, format: 'jsonl', out: dir.path(`${report}.jsonl`) });
      same(readFileSync(dir.path(`${report}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line)));

      await exportReport({ database: path, report, format: 'parquet', out: dir.path(`${report}.parquet`) });
      const table = tableFromIPC(parquet.readParquet(readFileSync(dir.path(`${report}.parquet`))).intoIPCStream());
      same(table.toArray().map((row) => row.toJSON() as Record<string, unknown>));
      if (report === 'domains') expect(table.schema.fields.map((f) => `${f.name}:${f.type}`)).toEqual(['query:Utf8', 'country:Utf8', 'domain:Utf8', 'results:Int32', 'best_rank:Int32', 'average_rank:Float64', 'share:Float64']);
    }
  });

  it('filters by query and country; names a report that does not apply', async () => {
    await using sim = await simulator({ seed: 2 });
    using dir = workdir();
    const pipeline = (mode: 'append' | 'replace', scope: 'series' | 'global', name: string) => ({
      name,
      source: searchPages({ queries: ['tea', 'coffee'], countries: ['us', 'gb'], maxPages: 1 }),
      stages: [normalize(), dedupe({ scope })],
      sinks: [toSqlite({ path: dir.path(`${name}.sqlite`), mode })],
    });
    await runOn(sim, pipeline('append', 'series', 'append'));
    const chunks: string[] = [];
    const out = { write: (text: string) => chunks.push(text) > 0, once: () => undefined } as unknown as NodeJS.WritableStream;
    const { rows } = await exportReport({ database: dir.path('append.sqlite'), report: 'rankings', format: 'jsonl', out: out as never, query: 'tea', country: 'GB' });
    const lines = chunks.join('').trim().split('\n').map((line) => JSON.parse(line));
    expect(lines).toHaveLength(rows);
    expect(new Set(lines.map((l) => `${l.query}|${l.country}`))).toEqual(new Set(['tea|gb']));

    await runOn(sim, pipeline('replace', 'series', 'replace'));
    await runOn(sim, pipeline('append', 'global', 'global'));
    const views = (name: string) => sqliteRows(dir.path(`${name}.sqlite`), "SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name").map((r) => r.name);
    expect(views('append')).toEqual(['report_changes', 'report_domains', 'report_overlap', 'report_rankings', 'report_spend', 'webdata_spend']);
    expect(views('replace')).toEqual(['report_domains', 'report_overlap', 'report_rankings', 'report_spend', 'webdata_spend']);
    expect(views('global')).toEqual(['report_spend', 'webdata_spend']);
    const error = await exportReport({ database: dir.path('replace.sqlite'), report: 'changes', out: dir.path('x.csv') }).catch((e: unknown) => e);
    expect(String(error)).toContain('"changes" needs append mode');
  });

  it('a million rows stream out in flat memory, to CSV, JSON Lines and Parquet', async () => {
    using dir = workdir();
    // A 128 MB heap cap is the proof: a million rows of ~700 bytes would need far more if they were held at once.
    const child = spawn(process.execPath, ['--max-old-space-size=128', 'test/fixtures/export-million.ts', dir.dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const code = await new Promise((done) => child.on('exit', done));
    expect(code).toBe(0);
    const result = JSON.parse(stdout) as Record<'csv' | 'jsonl' | 'parquet', { rows: number; peakGrowthMb: number }>;
    for (const format of ['csv', 'jsonl', 'parquet'] as const) {
      expect(result[format].rows).toBe(1_000_000);
      // Memory bound, not time: growth over the process's size before the export began.
      expect(result[format].peakGrowthMb).toBeLessThan(200);
    }
    const file = await parquet.ParquetFile.fromFile(await openAsBlob(dir.path('million.parquet')));
    const meta = file.metadata();
    expect(meta.fileMetadata().numRows()).toBe(1_000_000);
    expect(meta.numRowGroups()).toBe(20);
  }, 240_000);
});
