import { existsSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { dedupe, normalize, pipelineFromConfig, type RunContext, searchPages, toCsv, toJsonl, toSqlite, ValidationError } from '../../src/index.ts';
import { exportReport } from '../../src/analytics/index.ts';
import { readInputFile } from '../../src/input-file.ts';
import { STATE_SCHEMA_VERSION } from '../../src/state/sqlite/schema.ts';
import { RESULTS_SCHEMA_VERSION } from '../../src/sinks/sqlite.ts';
import { cli, envFor, ROOT } from '../cli-helpers.ts';
import { clientFor, rejection, simulator, TEST_KEY } from '../helpers.ts';
import { csvRows, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const VALID = {
  name: 'hostile',
  api: { timeoutMs: 1000 },
  search: { queries: ['x'], countries: ['us'], langs: ['en'], maxPages: 2, count: 10 },
  rate: { requestsPerSecond: 5, concurrency: 2 },
  budget: { maxCredits: 10 },
  credits: { weights: { '/searchengine/search': 1 } },
  retry: { attempts: 3 },
  rateLimit: { retries: 3 },
  dedupe: { key: 'url', scope: 'series' },
  state: { journal: 'prune' },
  sinks: [
    { type: 'sqlite', path: 'x.sqlite', table: 'results', mode: 'append' },
    { type: 'csv', path: 'x.csv', delimiter: ',' },
    { type: 'jsonl', path: 'x.jsonl' },
  ],
};

/** Sets `value` at a dotted path of a copy of the valid config. */
function withField(path: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(VALID) as Record<string, unknown>;
  const parts = path.split('.');
  let cursor = copy as Record<string, unknown>;
  for (const part of parts.slice(0, -1)) cursor = cursor[part] as Record<string, unknown>;
  cursor[parts.at(-1) as string] = value;
  return copy;
}

// Every field, invalid in turn, and the path the error must name.
const INVALID: [string, unknown, string][] = [
  ['name', 'no spaces allowed', 'name'],
  ['name', 42, 'name'],
  ['api.timeoutMs', -1, 'api.timeoutMs'],
  ['api.userAgent', '', 'api.userAgent'],
  ['api.timeoutMs', 2 ** 31, 'api.timeoutMs'],
  ['api.userAgent', 'etl/1.0\r\nX-Injected: 1', 'api.userAgent'],
  ['api.extraCountries', 'xk', 'api.extraCountries'],
  ['api.bogus', true, 'api'],
  ['search.queries', 'one query', 'search.queries'],
  ['search.queries', [], 'search.queries'],
  ['search.countries', ['us', 'uk'], 'search.countries.1'],
  ['search.countries', ['USA'], 'search.countries.0'],
  ['search.langs', ['english'], 'search.langs.0'],
  ['search.langs', ['xx-yy'], 'search.langs.0'],
  ['search.maxPages', 0, 'search.maxPages'],
  ['search.maxPages', 1.5, 'search.maxPages'],
  ['search.count', '10', 'search.count'],
  ['search.firstPage', -3, 'search.firstPage'],
  ['search.stopOnShortPage', 'yes', 'search.stopOnShortPage'],
  ['search.stopAfterNoNew', 0, 'search.stopAfterNoNew'],
  ['search.extra', 1, 'search'],
  ['rate.requestsPerSecond', 0, 'rate.requestsPerSecond'],
  ['rate.concurrency', 0, 'rate.concurrency'],
  ['rate.requests', 10, 'rate'],
  ['budget.maxCredits', -1, 'budget.maxCredits'],
  ['credits.weights', { '/searchengine/search': 'one' }, 'credits.weights./searchengine/search'],
  ['retry.attempts', 0, 'retry.attempts'],
  ['rateLimit.retries', -1, 'rateLimit.retries'],
  ['dedupe.key', 7, 'dedupe.key'],
  ['dedupe.scope', 'universe', 'dedupe.scope'],
  ['dedupe.persistent', 'always', 'dedupe.persistent'],
  ['state.journal', 'sometimes', 'state.journal'],
  ['sinks', [], 'sinks'],
  ['sinks.0.type', 'postgres', 'sinks.0'],
  ['sinks.0.path', '', 'sinks.0.path'],
  ['sinks.0.table', 'drop table', 'sinks.0.table'],
  ['sinks.0.table', 'runs', 'sinks.0.table'],
  ['sinks.0.mode', 'merge', 'sinks.0.mode'],
  ['sinks.1.delimiter', ';;', 'sinks.1.delimiter'],
  ['sinks.1.bom', 'yes', 'sinks.1.bom'],
  ['sinks.2.rawAsString', 1, 'sinks.2.rawAsString'],
  // An unknown field is named by its own path (was its object's: "(root)").
  ['unexpected', true, 'unexpected'],
];

describe('bad input', () => {
  it('every config field, invalid in turn, is named by its path, before anything runs', () => {
    expect(() => pipelineFromConfig(VALID)).not.toThrow();
    for (const [path, value, named] of INVALID) {
      let error: unknown;
      try {
        pipelineFromConfig(withField(path, value));
      } catch (e) {
        error = e;
      }
      expect(error, `${path} = ${JSON.stringify(value)}`).toBeInstanceOf(ValidationError);
      const paths = (error as ValidationError).issues.map((issue) => issue.path || '(root)');
      expect(paths.some((p) => p === named || p.startsWith(`${named}.`)), `${path}: ${paths.join(', ')}`).toBe(true);
      for (const issue of (error as ValidationError).issues) expect(issue.message.length).toBeGreaterThan(5);
    }
  });

  it('an endpoint source with bad fields, likewise', () => {
    const base = { name: 'e', sinks: [{ type: 'csv', path: 'x.csv' }] };
    for (const [endpoint, named] of [
      [{ path: 'no-slash' }, 'endpoint.path'],
      [{ path: '/a/../b' }, 'endpoint.path'],
      [{ path: '/x', itemsAt: '' }, 'endpoint.itemsAt'],
      [{ path: '/x', cursor: { from: 'next' } }, 'endpoint.cursor.param'],
      [{ path: '/x', params: { nested: { no: 1 } } }, 'endpoint.params'],
    ] as const) {
      const error = (() => {
        try {
          pipelineFromConfig({ ...base, endpoint });
        } catch (e) {
          return e as ValidationError;
        }
      })();
      expect(error, JSON.stringify(endpoint)).toBeInstanceOf(ValidationError);
      expect(error?.issues.some((i) => i.path.startsWith(named)), `${JSON.stringify(endpoint)}: ${error?.message}`).toBe(true);
    }
  });

  it('a million queries: planned, estimated and run within the budget, lazily', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const queries = Array.from({ length: 1_000_000 }, (_, i) => `query ${i}`);
    writeFileSync(dir.path('million.txt'), queries.join('\n'));
    writeFileSync(
      dir.path('million.json'),
      JSON.stringify({ name: 'million', search: { queriesFile: 'million.txt', maxPages: 2 }, budget: { maxCredits: 30 }, rate: { concurrency: 4 }, sinks: [{ type: 'sqlite', path: 'm.sqlite' }] }),
    );
    const estimate = await cli(['estimate', 'million.json', '--json'], { cwd: dir.dir });
    expect(JSON.parse(estimate.stdout)).toMatchObject({ series: 1_000_000, requests: 2_000_000, credits: 2_000_000, withinBudget: false });
    const result = await cli(['run', 'million.json', '--quiet'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout);
    expect(summary).toMatchObject({ status: 'budget', credits: { budget: 30, uncertain: 0 }, series: { total: 1_000_000 } });
    // Never past the budget; short of it only by a request that failed for good at the end (none, normally).
    expect(summary.credits.spent).toBeLessThanOrEqual(30);
    expect(summary.credits.spent).toBeGreaterThanOrEqual(26);
    expect(sim.stats().credits.main?.debited).toBe(summary.credits.spent);
    // Once the budget can take no request more, the series left are not started, nor recorded one by one: a resume
    // with a larger budget takes them up.
    expect(summary.series.stopped.budget).toBeGreaterThan(999_900);
    expect(Number(sqliteRows(dir.path('m.sqlite'), 'SELECT COUNT(*) AS n FROM series')[0]?.n)).toBeLessThan(60);
    const more = await cli(['run', 'million.json', '--resume', '--budget', '60', '--quiet'], { cwd: dir.dir, env: envFor(sim.url) });
    const resumed = JSON.parse(more.stdout);
    expect(resumed).toMatchObject({ runId: summary.runId, status: 'budget', credits: { budget: 60 } });
    expect(resumed.credits.spent).toBeGreaterThan(summary.credits.spent + 25);
    expect(resumed.credits.spent).toBeLessThanOrEqual(60);
    expect(resumed.series.completed).toBeGreaterThan(summary.series.completed + 10);
    expect(sim.stats().credits.main?.debited).toBe(resumed.credits.spent);
  }, 120_000);

  it('items with NUL bytes, lone surrogates, 1 MB strings, nesting deeper than JSON.stringify, numbers for strings: stored safely', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const depth = 50_000;
    const huge = 'é'.repeat(512 * 1024);
    const items = [
      { title: 'a\u0000b', url: 'https://nul.example/\u0000', snippet: '\u0000' },
      { title: 'lone \ud83d and \udc00', url: 'https://surrogate.example/', snippet: 'x\ud800' },
      { title: huge, url: 'https://huge.example/', snippet: huge },
      { title: 12345, url: 67890, snippet: true, deep: 'DEEP' },
      { title: ['not', 'text'], url: { href: 'https://object.example/' }, snippet: null },
      { title: '=cmd|"/c calc"!A1', url: 'https://formula.example/' },
    ];
    const body = JSON.stringify({ data: items }).replace('"DEEP"', `${'['.repeat(depth)}${']'.repeat(depth)}`);
    sim.inject({ fault: 'status', status: 200, body, times: 1 });
    const summary = await runOn(sim, {
      name: 'hostile-items',
      source: searchPages({ queries: ['x'], maxPages: 1, count: null }),
      stages: [normalize(), dedupe()],
      sinks: [toSqlite({ path: dir.path('h.sqlite') }), toCsv({ path: dir.path('h.csv') }), toJsonl({ path: dir.path('h.jsonl') })],
    });
    expect(summary).toMatchObject({ status: 'completed', items: { served: 6, written: 6 } });
    const rows = sqliteRows(dir.path('h.sqlite'), 'SELECT title, url, snippet, raw FROM results ORDER BY position');
    expect(rows.map((r) => r.title)).toEqual(['ab', 'lone \ufffd and \ufffd', huge, '12345', null, '=cmd|"/c calc"!A1']);
    expect(rows[3]?.url).toBe('67890');
    expect(String(rows[3]?.raw).length).toBeGreaterThan(depth * 2);
    expect(String(rows[2]?.raw).length).toBeGreaterThan(1_000_000);
    const csv = csvRows(dir.path('h.csv'));
    expect(csv).toHaveLength(6);
    expect(csv[5]?.title).toBe(`'=cmd|"/c calc"!A1`);
    const lines = readFileSync(dir.path('h.jsonl'), 'utf8').trim().split('\n');
    expect(lines).toHaveLength(6);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    // And out again, in every format.
    for (const format of ['csv', 'jsonl', 'parquet'] as const) {
      expect((await exportReport({ database: dir.path('h.sqlite'), report: 'items', format, out: dir.path(`out.${format}`) })).rows).toBe(6);
    }
  }, 60_000);
});

/** A JSON pipeline in `dir` (one query, one page, a SQLite sink) with `overrides`; returns its file name. */
function jsonPipeline(dir: string, overrides: Record<string, unknown> = {}, search: Record<string, unknown> = {}): string {
  const config = { name: 'local', search: { queries: ['espresso'], maxPages: 1, ...search }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }], ...overrides };
  writeFileSync(join(dir, 'pipeline.json'), JSON.stringify(config));
  return 'pipeline.json';
}

/** A pipeline module in `dir` that imports the library from source; `body` ends with its default export. */
function modulePipeline(dir: string, body: string, name = 'pipeline.ts'): string {
  writeFileSync(join(dir, name), `import * as etl from ${JSON.stringify(join(ROOT, 'src/index.ts'))};\n${body}\n`);
  return name;
}

/** `webdata-etl run <file>` in `dir` against a live simulator: the exit code, what it printed, and the requests it sent. */
async function runIn(dir: string, file: string) {
  await using sim = await simulator();
  const result = await cli(['run', file, '--quiet'], { cwd: dir, env: envFor(sim.url) });
  return { ...result, requests: sim.stats().requests };
}

const MB = 1024 * 1024;

describe('bad local input: exit 2, naming the field or the file, before any request', () => {
  it('api.timeoutMs past what Node can time (2^31 ms) and an api.userAgent with a line break are refused (were taken: every request failed, exit 5)', async () => {
    using dir = workdir();
    const timeout = await runIn(dir.dir, jsonPipeline(dir.dir, { api: { timeoutMs: 2 ** 31 } }));
    expect(timeout).toMatchObject({ code: 2, requests: 0 });
    expect(timeout.stderr).toMatch(/api\.timeoutMs: must be a whole number of milliseconds from 1 to 2147483647/);
    const agent = await runIn(dir.dir, jsonPipeline(dir.dir, { api: { userAgent: 'etl/1.0\r\nX-Injected: 1' } }));
    expect(agent).toMatchObject({ code: 2, requests: 0 });
    expect(agent.stderr).toMatch(/api\.userAgent: must be an HTTP header value: no line breaks or other control characters/);
    // Nothing was run: no run, no credit counted.
    expect(existsSync(dir.path('out/results.sqlite'))).toBe(false);
    // The largest timer Node arms, and a header value with a tab and Latin-1, are taken.
    expect(() => pipelineFromConfig({ ...VALID, api: { timeoutMs: 2 ** 31 - 1, userAgent: 'café\tetl/1.0' } })).not.toThrow();
  });

  it('a query CSV with 5,000 columns is refused naming search.queriesFile and the limit (SQLite failed on it: exit 1)', async () => {
    using dir = workdir();
    const columns = Array.from({ length: 5000 }, (_, i) => `tag${i}`);
    writeFileSync(dir.path('wide.csv'), `query,${columns.join(',')}\nespresso,${columns.map(() => 'v').join(',')}\n`);
    const result = await runIn(dir.dir, jsonPipeline(dir.dir, {}, { queries: [], queriesFile: 'wide.csv' }));
    expect(result).toMatchObject({ code: 2, requests: 0 });
    expect(result.stderr).toMatch(/search\.queriesFile: \S*wide\.csv has 5,000 columns besides the query; the most is 100/);
    // The limit itself is allowed.
    writeFileSync(dir.path('hundred.csv'), `query,${columns.slice(0, 100).join(',')}\nespresso,${columns.slice(0, 100).map(() => 'v').join(',')}\n`);
    expect(searchPages({ queriesFile: dir.path('hundred.csv') }).plan().tagColumns).toHaveLength(100);
  });

  it('a query file over 256 MB is refused from its size, unread; a stream is read no further than the limit', async () => {
    using dir = workdir();
    // Sparse: 300 MB long, nothing on disk.
    writeFileSync(dir.path('huge.txt'), '');
    truncateSync(dir.path('huge.txt'), 300 * MB);
    const result = await runIn(dir.dir, jsonPipeline(dir.dir, {}, { queries: [], queriesFile: 'huge.txt' }));
    expect(result).toMatchObject({ code: 2, requests: 0 });
    expect(result.stderr).toMatch(/search\.queriesFile: \S*huge\.txt is 314,572,800 bytes; the most is 268,435,456 bytes \(256 MB\), and it was not read/);
    // A device that never ends (a pipe, /dev/stdin) has no size to go by: it is read up to the limit, then refused.
    const limit = { maxBytes: 1000, field: 'search.queriesFile', subject: 'Invalid search source', tooLarge: 'split it' };
    expect(() => readInputFile('/dev/zero', limit)).toThrow(/search\.queriesFile: \/dev\/zero is more than 1,000 bytes/);
  });

  it('more than a million queries are refused before the list is split (18.6 million lines under 256 MB crashed a Set: exit 1)', async () => {
    using dir = workdir();
    const lines = Array.from({ length: 1_000_001 }, (_, i) => `q${i}`);
    writeFileSync(dir.path('lines.txt'), `${lines.join('\n')}\n`);
    expect(() => searchPages({ queriesFile: dir.path('lines.txt') })).toThrow(/search\.queriesFile: \S*lines\.txt has more lines than a pipeline may have queries: 1,000,000 in all/);
    writeFileSync(dir.path('rows.csv'), `query,segment\n${lines.join(',a\n')},a\n`);
    expect(() => searchPages({ queriesFile: dir.path('rows.csv') })).toThrow(/rows\.csv has more rows than a pipeline may have queries/);
    // Inline queries count too.
    writeFileSync(dir.path('half.txt'), lines.slice(0, 500_000).join('\n'));
    expect(() => searchPages({ queries: lines.slice(500_000, 1_000_001), queriesFile: dir.path('half.txt') })).toThrow(/half\.txt has more lines than/);
    expect(searchPages({ queries: lines.slice(500_000, 1_000_000), queriesFile: dir.path('half.txt') }).plan().seriesCount).toBe(1_000_000);
  });

  it('a query longer than 2,048 characters is refused wherever it is (inline, a line, a CSV row), and so is a long tag', async () => {
    using dir = workdir();
    const long = 'é'.repeat(2049);
    const inline = await runIn(dir.dir, jsonPipeline(dir.dir, {}, { queries: ['espresso', long] }));
    expect(inline).toMatchObject({ code: 2, requests: 0 });
    expect(inline.stderr).toContain('search.queries.1: the query is 2,049 characters long; the most is 2,048 (Unicode characters, counted after trimming)');
    writeFileSync(dir.path('q.txt'), `espresso\nkettle\n${long}\n`);
    expect(() => searchPages({ queriesFile: dir.path('q.txt') })).toThrow(/search\.queriesFile: line 3: the query is 2,049 characters long/);
    writeFileSync(dir.path('q.csv'), `query,segment\nespresso,a\n"${long}",b\n`);
    expect(() => searchPages({ queriesFile: dir.path('q.csv') })).toThrow(/search\.queriesFile: row 3: the query is 2,049 characters long/);
    writeFileSync(dir.path('tag.csv'), `query,segment\nespresso,${'t'.repeat(3000)}\n`);
    expect(() => searchPages({ queriesFile: dir.path('tag.csv') })).toThrow(/search\.queriesFile: row 2, column "segment": the tag is 3,000 characters long; the most is 2,048/);
    // Every line is checked, the first few named.
    writeFileSync(dir.path('many.txt'), Array.from({ length: 12 }, () => long).join('\n'));
    const many = (() => {
      try {
        searchPages({ queriesFile: dir.path('many.txt') });
      } catch (error) {
        return error as ValidationError;
      }
    })();
    expect(many?.issues.map((i) => i.message.slice(0, 7))).toEqual(['line 1:', 'line 2:', 'line 3:', 'line 4:', 'line 5:', 'and 7 m']);
    // Characters, not UTF-16 units (an emoji is one), counted after trimming: 2,048 of them go.
    expect(searchPages({ queries: [`  ${'😀'.repeat(2048)}  `, 'x'.repeat(2048)] }).plan().seriesCount).toBe(2);
  });

  it('the client refuses a q longer than 2,048 characters, and an endpoint source a parameter value as long: nothing is sent', async () => {
    await using sim = await simulator();
    await using client = clientFor(sim);
    const error = await rejection(client.search({ q: 'x'.repeat(2049) }));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toContain('q: is 2,049 characters long; the most is 2,048');
    expect(sim.stats().requests).toBe(0);
    expect(() => pipelineFromConfig({ name: 'e', endpoint: { path: '/x', params: [{ id: 1 }, { url: 'u'.repeat(2049) }] }, sinks: [{ type: 'csv', path: 'x.csv' }] })).toThrow(
      /endpoint\.params\.1\.url: is 2,049 characters long; the most is 2,048/,
    );
  });

  it('a JSON config over 16 MB, or one that is not an object, is refused saying so', async () => {
    using dir = workdir();
    writeFileSync(dir.path('big.json'), JSON.stringify({ $schema: 'x'.repeat(17 * MB), name: 'big', search: { queries: ['espresso'], maxPages: 1 }, sinks: [{ type: 'csv', path: 'out/x.csv' }] }));
    const big = await runIn(dir.dir, 'big.json');
    expect(big).toMatchObject({ code: 2, requests: 0 });
    expect(big.stderr).toMatch(/\(file\): \S*big\.json is 17,825,\d{3} bytes; the most is 16,777,216 bytes \(16 MB\)/);
    writeFileSync(dir.path('list.json'), '[{ "name": "a" }]');
    const list = await runIn(dir.dir, 'list.json');
    expect(list.code).toBe(2);
    expect(list.stderr).toContain('(root): must be one JSON object, { "name": …, "search": { … }, "sinks": [ … ] }, not an array');
  });

  it('a JSONL file that does not end with a line end is refused naming jsonl.path (was exit 1)', async () => {
    using dir = workdir();
    mkdirSync(dir.path('out'));
    writeFileSync(dir.path('out/x.jsonl'), '{"a":1}');
    const result = await runIn(dir.dir, jsonPipeline(dir.dir, { sinks: [{ type: 'jsonl', path: 'out/x.jsonl' }] }));
    expect(result).toMatchObject({ code: 2, requests: 0 });
    expect(result.stderr).toMatch(/jsonl\.path: \S*x\.jsonl does not end with a line end/);
  });

  it('a results table or a state store of a newer webdata-etl is refused naming sqlite.path or state.path, and left as it was (was exit 1)', async () => {
    using dir = workdir();
    mkdirSync(dir.path('out'));
    const results = new Database(dir.path('out/results.sqlite'));
    results.pragma('user_version = 99');
    results.close();
    const newerResults = await runIn(dir.dir, jsonPipeline(dir.dir, { state: { path: 'out/state.sqlite' } }));
    expect(newerResults).toMatchObject({ code: 2, requests: 0 });
    expect(newerResults.stderr).toMatch(new RegExp(`sqlite\\.path: \\S*results\\.sqlite was written by a newer webdata-etl \\(results schema 99; this one knows ${RESULTS_SCHEMA_VERSION}\\): upgrade webdata-etl, or use another file`));
    const state = new Database(dir.path('out/newer.state.sqlite'));
    state.exec(`CREATE TABLE webdata_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO webdata_meta VALUES ('state_schema', '99')`);
    state.close();
    const newerState = await runIn(dir.dir, jsonPipeline(dir.dir, { state: { path: 'out/newer.state.sqlite' }, sinks: [{ type: 'csv', path: 'out/x.csv' }] }));
    expect(newerState).toMatchObject({ code: 2, requests: 0 });
    expect(newerState.stderr).toMatch(new RegExp(`state\\.path: \\S*newer\\.state\\.sqlite holds state written by a newer webdata-etl \\(state schema 99; this one knows ${STATE_SCHEMA_VERSION}\\)`));
    expect(sqliteRows(dir.path('out/newer.state.sqlite'), `SELECT name FROM sqlite_master WHERE type = 'table'`)).toEqual([{ name: 'webdata_meta' }]);
  });

  it('another program’s database with a "runs" table is refused as a state store naming state.path, and left as it was', async () => {
    using dir = workdir();
    mkdirSync(dir.path('out'));
    const foreign = new Database(dir.path('out/app.sqlite'));
    foreign.exec(`CREATE TABLE runs (id INTEGER PRIMARY KEY, athlete TEXT, km REAL); INSERT INTO runs (athlete, km) VALUES ('ana', 10.5)`);
    foreign.close();
    const result = await runIn(dir.dir, jsonPipeline(dir.dir, { state: { path: 'out/app.sqlite' }, sinks: [{ type: 'csv', path: 'out/x.csv' }] }));
    expect(result).toMatchObject({ code: 2, requests: 0 });
    expect(result.stderr).toMatch(/state\.path: \S*app\.sqlite holds runs of another program/);
    expect(sqliteRows(dir.path('out/app.sqlite'), `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)).toEqual([{ name: 'runs' }]);
  });

  it('an output that is not a SQLite database, or a damaged one, is refused naming it (was exit 1)', async () => {
    using dir = workdir();
    mkdirSync(dir.path('out'));
    writeFileSync(dir.path('out/results.sqlite'), 'query,title\nespresso,a CSV where the database should be\n');
    const text = await runIn(dir.dir, jsonPipeline(dir.dir));
    expect(text).toMatchObject({ code: 2, requests: 0 });
    expect(text.stderr).toMatch(/\S*out\/results\.sqlite: not a SQLite database, or a damaged one \(file is not a database\): give the pipeline another file/);
    // A database whose pages were overwritten, its header intact.
    const db = new Database(dir.path('out/damaged.sqlite'));
    db.exec('CREATE TABLE notes (x TEXT)');
    db.close();
    const bytes = readFileSync(dir.path('out/damaged.sqlite'));
    writeFileSync(dir.path('out/damaged.sqlite'), bytes.fill(0xff, 100));
    const damaged = await runIn(dir.dir, jsonPipeline(dir.dir, { sinks: [{ type: 'sqlite', path: 'out/damaged.sqlite' }] }));
    expect(damaged).toMatchObject({ code: 2, requests: 0 });
    expect(damaged.stderr).toMatch(/\S*damaged\.sqlite: not a SQLite database, or a damaged one \(database disk image is malformed\)/);
    // A state store that is not a database is named alone, not with every SQLite output of the run.
    writeFileSync(dir.path('out/state.sqlite'), 'words, not a database\n'.repeat(10));
    const state = await runIn(dir.dir, jsonPipeline(dir.dir, { state: { path: 'out/state.sqlite' }, sinks: [{ type: 'sqlite', path: 'out/fresh.sqlite' }] }));
    expect(state).toMatchObject({ code: 2, requests: 0 });
    expect(state.stderr).toMatch(/webdata-etl: \S*out\/state\.sqlite: not a SQLite database/);
  });

  it('an output path that is a directory is refused naming it (was exit 1)', async () => {
    using dir = workdir();
    mkdirSync(dir.path('out/x.csv'), { recursive: true });
    const result = await runIn(dir.dir, jsonPipeline(dir.dir, { sinks: [{ type: 'csv', path: 'out/x.csv' }] }));
    expect(result).toMatchObject({ code: 2, requests: 0 });
    expect(result.stderr).toMatch(/webdata-etl: \S*out\/x\.csv: a file cannot be written there \(EISDIR/);
  });

  it('export, report, runs and spend on a file that is not a database, a directory or a missing file: exit 2 naming it (was exit 1, "file is not a database")', async () => {
    using dir = workdir();
    writeFileSync(dir.path('notes.sqlite'), 'not a database, just words\n'.repeat(100));
    mkdirSync(dir.path('folder.sqlite'));
    const cases: [string, string][] = [
      ['notes.sqlite', 'is not a SQLite database, or a damaged one'],
      ['folder.sqlite', 'is not a file'],
      ['missing.sqlite', 'does not exist'],
    ];
    for (const [file, says] of cases) {
      for (const args of [['export', file, '--report', 'rankings'], ['report', file, '--out', 'report.html'], ['runs', file], ['spend', file]]) {
        // runs says "no runs yet", spend "no spend yet" (exit 0): nothing ran
        if ((args[0] === 'runs' || args[0] === 'spend') && file === 'missing.sqlite') continue;
        const result = await cli(args, { cwd: dir.dir });
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toContain(`database: ${file} ${says}`);
        expect(result.stderr).not.toContain('    at ');
      }
    }
    expect(readFileSync(dir.path('notes.sqlite'), 'utf8')).toBe('not a database, just words\n'.repeat(100));
  });

  it('a pipeline module that throws or does not parse, or whose default export is not a pipeline: exit 2 naming the file (was exit 1)', async () => {
    using dir = workdir();
    writeFileSync(dir.path('throws.ts'), "const ready = false;\nif (!ready) throw new Error('this pipeline file is broken');\n");
    const throws = await runIn(dir.dir, 'throws.ts');
    expect(throws).toMatchObject({ code: 2, requests: 0 });
    expect(throws.stderr).toContain('webdata-etl: throws.ts could not be loaded: this pipeline file is broken (line 2)');
    writeFileSync(dir.path('syntax.ts'), 'const a = 1;\nconst = 2;\n');
    const syntax = await runIn(dir.dir, 'syntax.ts');
    expect(syntax).toMatchObject({ code: 2, requests: 0 });
    expect(syntax.stderr).toMatch(/syntax\.ts could not be loaded: .* \(line 2\)/);
    writeFileSync(dir.path('number.ts'), 'export default 42;\n');
    const number = await runIn(dir.dir, 'number.ts');
    expect(number).toMatchObject({ code: 2, requests: 0 });
    expect(number.stderr).toContain('number.ts: the default export is a number, not a pipeline');
    const combined = await runIn(dir.dir, modulePipeline(dir.dir, "export default { name: 'c', source: etl.combineSources(), sinks: [etl.toCsv({ path: 'out/x.csv' })] };"));
    expect(combined).toMatchObject({ code: 2, requests: 0 });
    expect(combined.stderr).toContain('source: combineSources() needs at least one source');
  });

  it('raw items into a sink of normalized columns: exit 2 naming the stages (was exit 1)', async () => {
    using dir = workdir();
    const file = modulePipeline(dir.dir, "export default { name: 'raw', source: etl.searchPages({ queries: ['espresso'], maxPages: 1 }), sinks: [etl.toSqlite({ path: 'out/raw.sqlite' })] };");
    const result = await runIn(dir.dir, file);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/The SQLite sink \S*raw\.sqlite got an item that is not normalized:\n {2}- stages: .*add normalize\(\) to the stages/);
    // Known only from the first page's items: one request was sent.
    expect(result.requests).toBe(1);
  });

  it('dedupe across series outside run() is refused naming dedupe.scope', async () => {
    const stage = dedupe({ scope: 'query' });
    const pages = (async function* () {})();
    const error = await rejection(stage(pages, {} as RunContext)[Symbol.asyncIterator]().next());
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).issues[0]?.path).toBe('dedupe.scope');
  });
});

describe('the secrets scan every test with outputs runs at its end', () => {
  it('finds the key in any file under the output directory, text or binary, however deep', () => {
    const dir = workdir();
    mkdirSync(dir.path('a/b'), { recursive: true });
    writeFileSync(dir.path('a/b/page.bin'), Buffer.concat([Buffer.from([0, 255, 7]), Buffer.from(TEST_KEY), Buffer.from([0])]));
    writeFileSync(dir.path('clean.csv'), 'title\nnothing here\n');
    expect(() => dir[Symbol.dispose]()).toThrow(/API key was written to .*page\.bin/);
  });
});
