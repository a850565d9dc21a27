import { spawn } from 'node:child_process';
import { appendFileSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { definePipeline, type Item, mapItems, type NormalizedItem, normalize, searchPages, toSqlite, ValidationError } from '../../src/index.ts';
import { jsonlSinkOptionsSchema, toJsonl } from '../../src/sinks/jsonl.ts';
import { clientFor, simulator, TEST_KEY } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { runChild, stableCsv } from '../run/resume-helpers.ts';

type Line = Record<string, unknown>;

/** The file's lines, parsed; it must end with a line end (no partial last line). */
function jsonlLines(path: string): Line[] {
  const text = readFileSync(path, 'utf8');
  if (text === '') return [];
  expect(text.endsWith('\n')).toBe(true);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as Line);
}

/** What two runs of the same plan must agree on: lines without run_id and fetched_at, in a stable order. */
const stableLines = (lines: Line[]) => lines.map(({ run_id: _r, fetched_at: _f, ...rest }) => JSON.stringify(rest)).sort();

/** A line as SQLite stores it: `raw` as JSON text. */
const asRow = (line: Line) => ({ ...line, raw: JSON.stringify(line.raw) });
const rowKey = (row: Record<string, unknown>) => `${row.run_id}|${row.query}|${row.country}|${row.page}|${row.position}`;
const byKey = <T extends Record<string, unknown>>(rows: T[]) => [...rows].sort((a, b) => (rowKey(a) < rowKey(b) ? -1 : 1));

describe('the JSONL sink', () => {
  it('writes one line per item with all its fields, raw nested as served; equal to the SQLite rows of the run', async () => {
    await using sim = await simulator({ seed: 4, untitledRate: 0.25 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'jsonl',
      source: searchPages({ queries: ['espresso machine', 'naïve\n"café", \u2028 tea'], countries: ['us', 'de'], langs: ['en'], maxPages: 2 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('out.sqlite') }), toJsonl({ path: dir.path('out.jsonl') })],
    });
    const text = readFileSync(dir.path('out.jsonl'), 'utf8');
    expect(text.charCodeAt(0)).toBe('{'.charCodeAt(0));
    expect(text).not.toContain('\r');
    const lines = jsonlLines(dir.path('out.jsonl'));
    const rows = sqliteRows(dir.path('out.sqlite'));
    expect(lines).toHaveLength(summary.items.written);
    expect(lines).toHaveLength(rows.length);
    for (const line of lines) expect(typeof line.raw).toBe('object');
    expect(lines.map(asRow)).toEqual(rows);

    // raw is what the simulator serves for the same request, fetched independently.
    await using client = clientFor(sim);
    const served = new Map<string, Item>();
    for (const query of ['espresso machine', 'naïve\n"café", \u2028 tea']) {
      for (const country of ['us', 'de']) {
        for (let page = 1; page <= 2; page++) {
          const { data } = await client.search({ q: query, country, lang: 'en', page, count: 10 });
          data.forEach((item, i) => served.set(`${query}|${country}|${page}|${i + 1}`, item));
        }
      }
    }
    expect(served.size).toBe(lines.length);
    for (const line of lines) expect(line.raw).toEqual(served.get(`${line.query}|${line.country}|${line.page}|${line.position}`));
  });

  it('a second run appends without repeating anything; bytes never committed are cut first', async () => {
    await using sim = await simulator({ seed: 6 });
    using dir = workdir();
    const pipeline = () =>
      definePipeline({
        name: 'twice',
        source: searchPages({ queries: ['a', 'b'], maxPages: 2 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('t.sqlite') }), toJsonl({ path: dir.path('t.jsonl') })],
      });
    const first = await runOn(sim, pipeline());
    const firstText = readFileSync(dir.path('t.jsonl'), 'utf8');
    // What a crash after the write and before the checkpoint leaves: a line (or part of one) never committed.
    appendFileSync(dir.path('t.jsonl'), '{"run_id":"uncommitted","title":"cut of');
    const second = await runOn(sim, pipeline());
    expect(second.runId).not.toBe(first.runId);

    const lines = jsonlLines(dir.path('t.jsonl'));
    expect(lines).toHaveLength(first.items.written + second.items.written);
    expect(lines.slice(0, first.items.written).every((line) => line.run_id === first.runId)).toBe(true);
    expect(lines.slice(first.items.written).every((line) => line.run_id === second.runId)).toBe(true);
    expect(new Set(lines.map(rowKey)).size).toBe(lines.length);
    expect(readFileSync(dir.path('t.jsonl'), 'utf8').startsWith(firstText)).toBe(true);
    expect(lines.map(asRow)).toEqual(sqliteRows(dir.path('t.sqlite')));
  });

  it('refuses, before any request, a file shorter than its checkpoint, or one not ending with a line end', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const pipeline = (path: string) =>
      definePipeline({ name: 'refused', source: searchPages({ queries: ['x'], maxPages: 1 }), stages: [normalize()], sinks: [toJsonl({ path })] });
    await runOn(sim, pipeline(dir.path('r.jsonl')));
    const text = readFileSync(dir.path('r.jsonl'), 'utf8');
    writeFileSync(dir.path('r.jsonl'), text.slice(0, text.indexOf('\n') + 1));
    const before = sim.stats().requests;
    const shorter = await runOn(sim, pipeline(dir.path('r.jsonl'))).catch((e: unknown) => e);
    expect(String(shorter)).toMatch(/is shorter \(\d+ bytes\) than what was committed to it/);
    // Named by the sink's field, as every other refusal of a local file is.
    expect(String(shorter)).toContain('  - jsonl.path: ');
    expect(sim.stats().requests).toBe(before);

    writeFileSync(dir.path('other.jsonl'), '{"a":1}\n{"a":2}');
    const unended = await runOn(sim, pipeline(dir.path('other.jsonl'))).catch((e: unknown) => e);
    expect(String(unended)).toContain('does not end with a line end');
    expect(sim.stats().requests).toBe(before);
    expect(readFileSync(dir.path('other.jsonl'), 'utf8')).toBe('{"a":1}\n{"a":2}');
  });

  it('raw: deeper than JSON.stringify can go, pretty-printed, with a lone surrogate, not JSON at all; or kept a string', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const depth = 100_000;
    const deep = `{"data":[{"title":"deep","url":"https://deep.example/","nest":${'['.repeat(depth)}${']'.repeat(depth)}}]}`;
    sim.inject({ fault: 'status', status: 200, body: deep, match: { q: 'deep' } });
    const run = (name: string, query: string, sink: ReturnType<typeof toJsonl>, stages: unknown[] = []) =>
      runOn(sim, { name, source: searchPages({ queries: [query], maxPages: 1, count: null }), stages: [normalize(), ...(stages as [])], sinks: [sink] });

    await run('deep', 'deep', toJsonl({ path: dir.path('deep.jsonl') }));
    const [line] = jsonlLines(dir.path('deep.jsonl'));
    let level = (line?.raw as { nest: unknown }).nest;
    let levels = 0;
    while (Array.isArray(level)) [level, levels] = [level[0], levels + 1];
    expect(levels).toBe(depth);

    const odd = ['{\r\n  "pretty": [1,\n 2]\n}', '{"lone":"\uD800 and \uDC00"}', 'not json', '"just a string"'];
    const oddRaw = mapItems((item: NormalizedItem) => ({ ...item, raw: odd[item.position - 1] ?? item.raw }));
    await run('odd', 'odd', toJsonl({ path: dir.path('odd.jsonl') }), [oddRaw]);
    const text = readFileSync(dir.path('odd.jsonl'), 'utf8');
    expect(text.isWellFormed()).toBe(true);
    expect(jsonlLines(dir.path('odd.jsonl')).slice(0, 4).map((l) => l.raw)).toEqual([{ pretty: [1, 2] }, { lone: '\uD800 and \uDC00' }, 'not json', 'just a string']);

    await run('string', 'odd', toJsonl({ path: dir.path('string.jsonl'), rawAsString: true }));
    const asString = jsonlLines(dir.path('string.jsonl'));
    expect(asString.length).toBeGreaterThan(0);
    for (const l of asString) expect(typeof l.raw).toBe('string');

    // Raw items (no normalize): written as they are.
    await runOn(sim, { name: 'raw-items', source: searchPages({ queries: ['odd'], maxPages: 1 }), sinks: [toJsonl({ path: dir.path('items.jsonl') })] });
    expect(jsonlLines(dir.path('items.jsonl'))[0]).toHaveProperty('url');
  });

  it('options are validated', () => {
    expect(() => toJsonl({ path: '' })).toThrow(ValidationError);
    expect(() => toJsonl({ path: '' })).toThrow(/jsonl\.path/);
    expect(() => toJsonl({ path: 'x.jsonl', rawAsString: 'yes' } as never)).toThrow(/jsonl\.rawAsString/);
    expect(() => toJsonl({ path: 'x.jsonl', columns: ['a'] } as never)).toThrow(/columns/);
    expect(jsonlSinkOptionsSchema.parse({ path: 'x.jsonl' })).toEqual({ path: 'x.jsonl', rawAsString: false, shared: false, perWorker: false });
    expect(toJsonl({ path: 'x.jsonl' }).id).toBe(`jsonl:${process.cwd()}/x.jsonl`);
  });
});

describe('the JSONL sink across crashes', () => {
  const SIM = { seed: 21, latencyMs: { min: 2, max: 12 } } as const;
  const PLAN = { queries: ['espresso', 'kettle', 'grinder', 'milk frother', 'tamper'], countries: ['us', 'gb'], maxPages: 4, concurrency: 4 };

  it('SIGKILL after the write, before the checkpoint: resumed, the lines equal an uninterrupted run’s', async () => {
    let want: string[];
    {
      await using sim = await simulator(SIM);
      using dir = workdir();
      expect((await runChild({ ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'jsonl'] }).done).code).toBe(0);
      want = stableLines(jsonlLines(dir.path('out.jsonl')));
    }
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'jsonl'] };
    const killed = await runChild(spec, { WEBDATA_CRASH_AT: 'file-before-checkpoint:6' }).done;
    expect(killed.signal).toBe('SIGKILL');
    // The kill left lines past the checkpoint: the resume must cut them.
    const [checkpoint] = sqliteRows(dir.path('out.sqlite'), `SELECT bytes FROM sink_checkpoints WHERE sink_id = 'jsonl:${dir.path('out.jsonl')}'`);
    expect(statSync(dir.path('out.jsonl')).size).toBeGreaterThan(Number(checkpoint?.bytes));

    const resumed = await runChild(spec).done;
    expect(resumed.summary?.status).toBe('completed');
    // The page was written but not committed (its checkpoint goes in the page's own transaction): the tail is cut
    // back and the page fetched again, so nothing is replayed and nothing repeats.
    expect(resumed.replayed).toBe(0);
    const lines = jsonlLines(dir.path('out.jsonl'));
    expect(stableLines(lines)).toEqual(want);
    expect(byKey(lines.map(asRow))).toEqual(byKey(sqliteRows(dir.path('out.sqlite'))));
  });

  it('a CSV file written on the commit thread and a JSONL file on the run’s: crash points counted for the process, not a thread', async () => {
    let want: { csv: string[]; jsonl: string[] };
    const sinks = ['sqlite', 'csv', 'jsonl'];
    {
      await using sim = await simulator(SIM);
      using dir = workdir();
      expect((await runChild({ ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks }).done).code).toBe(0);
      want = { csv: stableCsv(dir.path('out.csv')), jsonl: stableLines(jsonlLines(dir.path('out.jsonl'))) };
    }
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks };
    // 40 pages: each thread reaches the point at most 40 times, the process about 80. Counted by thread, nothing dies.
    const killed = await runChild(spec, { WEBDATA_CRASH_AT: 'file-before-checkpoint:45' }).done;
    expect(killed.signal).toBe('SIGKILL');
    const resumed = await runChild(spec).done;
    expect(resumed.summary?.status).toBe('completed');
    expect({ csv: stableCsv(dir.path('out.csv')), jsonl: stableLines(jsonlLines(dir.path('out.jsonl'))) }).toEqual(want);
  });

  it('--fresh takes the abandoned run’s lines back, and keeps the runs before it', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'jsonl'] };
    const done = await runChild({ ...spec, queries: ['first'] }).done;
    expect(done.summary?.status).toBe('completed');
    const kept = readFileSync(dir.path('out.jsonl'), 'utf8');

    // Killed once its third page is committed (not at a moment the run could already have completed).
    expect((await runChild(spec, { WEBDATA_CRASH_AT: 'after-commit:3' }).done).signal).toBe('SIGKILL');
    const abandoned = jsonlLines(dir.path('out.jsonl')).filter((line) => line.run_id !== done.summary?.runId);
    expect(abandoned.length).toBeGreaterThan(0);

    const fresh = await runChild({ ...spec, fresh: true }).done;
    expect(fresh.summary?.status).toBe('completed');
    const text = readFileSync(dir.path('out.jsonl'), 'utf8');
    expect(text.startsWith(kept)).toBe(true);
    const lines = jsonlLines(dir.path('out.jsonl'));
    expect(new Set(lines.map((line) => line.run_id))).toEqual(new Set([done.summary?.runId, fresh.summary?.runId]));
    expect(byKey(lines.map(asRow))).toEqual(byKey(sqliteRows(dir.path('out.sqlite'))));
  });
});

describe('the JSONL sink on stdout', () => {
  /** Runs test/fixtures/jsonl-stdout.ts; with `slowReader`, its stdout is read only once the pipe is full (backpressure). */
  function runStdout(spec: Record<string, unknown>, { slowReader = false, closeAfter, env = {} }: { slowReader?: boolean; closeAfter?: number; env?: Record<string, string> } = {}) {
    const { WEBDATA_CRASH_AT: _crash, ...inherited } = process.env;
    const child = spawn(process.execPath, ['test/fixtures/jsonl-stdout.ts'], {
      env: { ...inherited, WEBDATA_API_KEY: TEST_KEY, WEBDATA_TEST_SPEC: JSON.stringify(spec), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    let stderr = '';
    let reading = false;
    const read = () =>
      child.stdout.on('data', (chunk: Buffer) => {
        stdout.push(chunk);
        // Like `| head`: the reader goes away.
        if (closeAfter !== undefined && Buffer.concat(stdout).length >= closeAfter) child.stdout.destroy();
      });
    const start = () => {
      if (reading) return;
      reading = true;
      read();
    };
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      // The slow reader starts once the run says the pipe is full (not after a guessed time: a slow run had not filled
      // it yet, and nothing waited for 'drain').
      if (stderr.includes('{"stdout":"full"}')) start();
    });
    // Or at once; or once the process ends, if it ends without having filled the pipe (the test then fails on its
    // assertions, not on a wait).
    if (!slowReader) start();
    child.once('exit', start);
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      child.on('close', (code) => resolve({ code, stdout: Buffer.concat(stdout).toString('utf8'), stderr })),
    );
  }

  it('writes the lines to stdout, waiting for a slow reader', async () => {
    await using sim = await simulator({ seed: 9 });
    using dir = workdir();
    const queries = Array.from({ length: 12 }, (_, i) => `query ${i}`);
    const result = await runStdout({ baseUrl: sim.url, dir: dir.dir, queries, maxPages: 4 }, { slowReader: true });
    expect(result.code).toBe(0);
    // Nothing was read before the pipe was full.
    expect(result.stderr).toContain('{"stdout":"full"}');
    const { summary, drains, maxBuffered } = JSON.parse(result.stderr.trim().split('\n').at(-1) ?? '{}') as {
      summary: { items: { written: number } };
      drains: number;
      maxBuffered: number;
    };
    expect(result.stdout.endsWith('\n')).toBe(true);
    const lines = result.stdout.slice(0, -1).split('\n').map((line) => JSON.parse(line) as Line);
    expect(lines).toHaveLength(summary.items.written);
    expect(new Set(lines.map(rowKey)).size).toBe(lines.length);
    for (const line of lines) expect(typeof line.raw).toBe('object');
    // More than a pipe holds: the run waited for 'drain' rather than holding it all in memory.
    expect(result.stdout.length).toBeGreaterThan(256 * 1024);
    expect(drains).toBeGreaterThan(0);
    expect(maxBuffered).toBeLessThan(64 * 1024);
  });

  it('is at least once across a crash: pages committed before a kill are re-sent on resume, none missed', async () => {
    await using sim = await simulator({ seed: 31 });
    using whole = workdir();
    const spec = { baseUrl: sim.url, queries: ['a', 'b', 'c', 'd'], maxPages: 3 };
    const reference = await runStdout({ ...spec, dir: whole.dir });
    const want = new Set(reference.stdout.trim().split('\n').map((line) => `${JSON.parse(line).query}|${JSON.parse(line).page}|${JSON.parse(line).position}`));
    using dir = workdir();
    const killed = await runStdout({ ...spec, dir: dir.dir }, { env: { WEBDATA_CRASH_AT: 'after-commit:4' } });
    expect(killed.code).toBe(null);
    const resumed = await runStdout({ ...spec, dir: dir.dir });
    expect(resumed.code).toBe(0);
    const got = new Set(`${killed.stdout}${resumed.stdout}`.trim().split('\n').map((line) => `${JSON.parse(line).query}|${JSON.parse(line).page}|${JSON.parse(line).position}`));
    expect(got).toEqual(want);
  });

  it('a reader that goes away ends the run with the error, not a crash', async () => {
    await using sim = await simulator({ seed: 9, latencyMs: 5 });
    using dir = workdir();
    const queries = Array.from({ length: 12 }, (_, i) => `query ${i}`);
    const result = await runStdout({ baseUrl: sim.url, dir: dir.dir, queries, maxPages: 4 }, { closeAfter: 1 });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^ERROR .*EPIPE/m);
    expect(sqliteRows(dir.path('state.sqlite'), 'SELECT status FROM runs')).toEqual([{ status: 'interrupted' }]);
  });
});
