import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunSummary } from '../../src/index.ts';
import type { Simulator, SimulatorOptions } from '../../src/simulator/index.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { simulator, TEST_KEY, until } from '../helpers.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';
import { stableCsv, stableSqlite } from './resume-helpers.ts';

/**
 * The fault matrix: each fault against the CLI, then the same checks — committed data intact, checkpoints
 * consistent, no credit beyond the budget, a clear error with the documented exit code — and, once the fault is
 * gone, a resume that completes the job with the rows of a run that never met it.
 */

const SIM: SimulatorOptions = { seed: 41, resultsPerQuery: 60 };
const SEARCH = { queries: ['alpha', 'beta', 'gamma'], countries: ['us', 'gb'], maxPages: 2 };
const BUDGET = 40;
const pipeline = (dir: string, extra: Record<string, unknown> = {}) =>
  config(
    dir,
    {
      budget: { maxCredits: BUDGET },
      retry: { attempts: 8, baseDelayMs: 5, maxDelayMs: 50 },
      rateLimit: { baseDelayMs: 10, maxDelayMs: 50 },
      // The client's own timeout (30 s): one short enough to make the hang test quick would also give up on healthy
      // answers whenever a loaded machine is slow to send them, and count them as uncertain spend.
      sinks: [
        { type: 'sqlite', path: 'out/results.sqlite' },
        { type: 'csv', path: 'out/results.csv' },
      ],
      ...extra,
    },
    SEARCH,
  );

let reference: { sqlite: string[]; csv: string[] } | undefined;
const SPLIT_SINKS = [
  { type: 'sqlite', path: 'out/results.sqlite' },
  { type: 'csv', path: 'csv/results.csv' },
];

/** What a run that never met a fault writes. */
async function clean() {
  if (reference) return reference;
  await using sim = await simulator(SIM);
  using dir = workdir();
  expect((await cli(['run', pipeline(dir.dir)], { cwd: dir.dir, env: envFor(sim.url) })).code).toBe(0);
  reference = { sqlite: stableSqlite(dir.path('out/results.sqlite')), csv: stableCsv(dir.path('out/results.csv')) };
  return reference;
}

/** Rows a running pipeline has committed to its SQLite file so far (0 before its tables exist). */
function committedRows(path: string): number {
  try {
    return Number(sqliteRows(path, 'SELECT COUNT(*) AS n FROM results')[0]?.n);
  } catch {
    return 0;
  }
}

/** Takes every free byte of a (small) disk with one file. */
function fill(disk: string) {
  const fd = openSync(join(disk, 'filler'), 'w');
  const block = Buffer.alloc(4096, 1);
  try {
    for (;;) writeSync(fd, block);
  } catch (error) {
    if ((error as { code?: string }).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
}

/** The checks every fault must pass, whatever the outcome of the run that met it. */
function intact(dir: string, sim: Simulator) {
  const db = join(dir, 'out/results.sqlite');
  if (!existsSync(db)) return;
  expect(sqliteRows(db, 'PRAGMA integrity_check')).toEqual([{ integrity_check: 'ok' }]);
  // A run that failed while creating its tables has no checkpoints yet.
  if (sqliteRows(db, "SELECT name FROM sqlite_master WHERE name = 'sink_checkpoints'").length === 0) return;
  // Checkpoints: no sink claims a page past the journal's sequence; a file is at least as long as its committed
  // length (bytes past it are cut back by the next run).
  const seq = Number(sqliteRows(db, "SELECT value FROM webdata_meta WHERE key = 'seq'")[0]?.value);
  for (const checkpoint of sqliteRows(db, 'SELECT sink_id, seq, bytes FROM sink_checkpoints')) {
    expect(Number(checkpoint.seq)).toBeLessThanOrEqual(seq);
    if (checkpoint.bytes !== null) expect(statSync(String(checkpoint.sink_id).replace(/^csv:/, '')).size).toBeGreaterThanOrEqual(Number(checkpoint.bytes));
  }
  // Every committed page a file sink lacks is still in the journal, to be re-delivered.
  const csvHeld = sqliteRows(db, "SELECT seq FROM sink_checkpoints WHERE sink_id LIKE 'csv:%'")[0];
  if (csvHeld) {
    const missing = sqliteRows(db, `SELECT COUNT(*) AS n FROM pages WHERE seq > ${Number(csvHeld.seq)}`)[0]?.n;
    expect(Number(missing)).toBe(seq - Number(csvHeld.seq));
  }
  expect(sim.stats().credits.main?.debited ?? 0).toBeLessThanOrEqual(BUDGET);
  const spent = sqliteRows(db, 'SELECT COALESCE(SUM(credits), 0) AS spent FROM spend')[0]?.spent;
  expect(Number(spent)).toBeLessThanOrEqual(BUDGET);
}

/** Runs the pipeline once into the fault, checks, removes the fault, resumes, and compares with a clean run. */
async function fault(options: {
  sim?: SimulatorOptions;
  extra?: Record<string, unknown>;
  arrange?: (sim: Simulator, dir: string) => void | Promise<void>;
  code: number;
  message?: RegExp;
  summary?: (summary: RunSummary, sim: Simulator) => void | Promise<void>;
  repair?: (sim: Simulator, dir: string) => void | Promise<void>;
  resumeArgs?: string[];
}) {
  const want = await clean();
  await using sim = await simulator({ ...SIM, ...options.sim });
  using dir = workdir();
  const file = pipeline(dir.dir, options.extra);
  await options.arrange?.(sim, dir.dir);
  const met = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
  expect(met.code, met.stderr).toBe(options.code);
  if (options.message) expect(met.stderr).toMatch(options.message);
  expect(met.stderr).not.toMatch(/\n\s+at .*\(.*:\d+:\d+\)/);
  if (options.summary) await options.summary(JSON.parse(met.stdout) as RunSummary, sim);
  intact(dir.dir, sim);
  await options.repair?.(sim, dir.dir);
  if (options.code !== 0) {
    const resumed = await cli(['run', file, ...(options.resumeArgs ?? [])], { cwd: dir.dir, env: envFor(sim.url) });
    expect(resumed.code, resumed.stderr).toBe(0);
    intact(dir.dir, sim);
  }
  expect(stableSqlite(dir.path('out/results.sqlite'))).toEqual(want.sqlite);
  expect(stableCsv(dir.path('out/results.csv'))).toEqual(want.csv);
  expect(sqliteRows(dir.path('out/results.sqlite'), 'SELECT status FROM runs')).toEqual([{ status: 'completed' }]);
}

describe('the fault matrix', () => {
  it('5xx bursts: retried with backoff, the job completes', () =>
    fault({ sim: { faults: { serverErrorRate: 0.4 } }, code: 0, summary: (s) => expect(s.retries).toBeGreaterThan(0) }));

  it('a 429 storm with Retry-After: paused as told, the job completes', () =>
    fault({
      arrange: (sim) => sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '1' }, times: 3 }),
      code: 0,
      summary: (s) => expect(s.rateLimitedWaitMs).toBeGreaterThanOrEqual(1000),
    }));

  it('a 429 storm without Retry-After: own backoff, the job completes', () =>
    fault({ arrange: (sim) => sim.inject({ fault: 'status', status: 429, times: 8 }), code: 0, summary: (s) => expect(s.requests.byStatus['429']).toBe(8) }), 60_000);

  it('answers that hang past the timeout: retried, counted as uncertain spend', () =>
    fault({
      extra: { api: { timeoutMs: 400 } },
      arrange: (sim) => sim.inject({ fault: 'hang', times: 3 }),
      code: 0,
      summary: async (s, sim) => {
        // Three requests hang; a healthy answer sent after the client gave up (a loaded machine can be that slow) is
        // given up on and charged too: none of them is known to the client, each counted as uncertain. (The other
        // faults, with the 30 s timeout, would show a client that gives up on answers early.) The simulator may
        // still be sending such an answer when the run has ended: counted once it has.
        await until(() => sim.stats().inFlight === 0);
        const late = (sim.stats().byStatus['200'] ?? 0) - (s.requests.byStatus['200'] ?? 0);
        expect(s.requests.byStatus.timeout).toBe(3 + late);
        expect(s.credits.uncertain).toBe(3 + late);
      },
    }));

  it('connection resets, some after the server charged: retried, counted as uncertain', () =>
    fault({
      arrange: (sim) => {
        sim.inject({ fault: 'reset', times: 2 });
        sim.inject({ fault: 'reset', charged: true, times: 2 });
      },
      code: 0,
      summary: (s) => expect(s.credits.uncertain).toBe(4),
    }));

  it('malformed and truncated JSON: retried, the 2xx counted as uncertain', () =>
    fault({
      arrange: (sim) => {
        sim.inject({ fault: 'malformed', form: 'truncated', times: 2 });
        sim.inject({ fault: 'malformed', form: 'not-json', times: 1 });
        sim.inject({ fault: 'malformed', form: 'no-data', times: 1 });
      },
      code: 0,
      summary: (s) => expect(s.credits.uncertain).toBe(4),
    }));

  it('a 3xx: not followed, its series fails (exit 5); --resume retries it once the redirect is gone', () =>
    fault({
      arrange: (sim) => sim.inject({ fault: 'redirect', match: { q: 'beta' } }),
      code: 5,
      summary: (s) => expect(s.series.failedBy).toEqual({ unexpected_status: 2 }),
      repair: (sim) => sim.clearRules(),
      resumeArgs: ['--resume'],
    }));

  it('401 mid-run: the run stops (exit 3), answers in flight kept; the next invocation resumes', () =>
    fault({
      arrange: (sim) => sim.inject({ fault: 'status', status: 401, after: 4 }),
      code: 3,
      message: /401/,
      repair: (sim) => sim.clearRules(),
    }));

  it('402 mid-run: the run stops (exit 4); resumes once credits are back', () =>
    fault({
      sim: { keys: [{ key: TEST_KEY, name: 'main', credits: 5 }] },
      code: 4,
      summary: (s) => expect(s.reason).toBe('payment_required'),
      repair: (sim) => sim.updateKey('main', { credits: 1000 }),
    }));

  it('a 429 quota with a Retry-After of hours: the run stops (exit 4) and says when to resume', () =>
    fault({
      arrange: (sim) => sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '7200' }, after: 5, times: 1 }),
      code: 4,
      summary: (s) => {
        expect(s.reason).toBe('quota');
        expect(Date.parse(String(s.resumeAt)) - Date.now()).toBeGreaterThan(7_000_000);
      },
    }));

  it('403 on one endpoint while another endpoint’s series go on (exit 4); resumes once the plan allows it', async () => {
    await using sim = await simulator({ ...SIM, keys: [{ key: TEST_KEY, name: 'main', endpoints: ['/searchengine/search'] }] });
    using dir = workdir();
    const file = pipeline(dir.dir, { endpoint: { path: '/video/search', params: [{ q: 'espresso' }, { q: 'tea' }], maxPages: 2 } });
    const met = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(met.code).toBe(4);
    const summary = JSON.parse(met.stdout) as RunSummary;
    expect(summary).toMatchObject({ status: 'stopped', reason: 'forbidden', series: { completed: 6, stopped: { forbidden: 2 } } });
    intact(dir.dir, sim);
    sim.updateKey('main', { endpoints: undefined });
    const resumed = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ status: 'completed', series: { completed: 8 } });
    expect(sqliteRows(dir.path('out/results.sqlite'), "SELECT COUNT(DISTINCT query) AS n FROM results WHERE query IN ('espresso', 'tea')")).toEqual([{ n: 2 }]);
  });

  it('a read-only output directory: refused before any request (exit 2); runs once writable', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const out = dir.path('out');
    mkdirSync(out);
    mount(['--bind', out, out]);
    try {
      mount(['-o', 'remount,bind,ro', out]);
      const met = await cli(['run', pipeline(dir.dir)], { cwd: dir.dir, env: envFor(sim.url) });
      expect(met.code).toBe(2);
      expect(met.stderr).toMatch(/cannot be written/);
      expect(sim.stats().requests).toBe(0);
    } finally {
      execFileSync('umount', [out]);
    }
    const ran = await cli(['run', pipeline(dir.dir)], { cwd: dir.dir, env: envFor(sim.url) });
    expect(ran.code).toBe(0);
  });

  // Each sink on its own disk, filled up once the first pages are committed while the simulator holds the rest
  // back with 503s: the CSV sink then meets ENOSPC on a write, the SQLite sink (which holds the run's state)
  // SQLITE_FULL inside a transaction. The other sink's disk has room.
  for (const full of ['csv', 'sqlite'] as const) {
    it(`a full disk mid-run (${full} sink): stops with what to do (exit 75), data intact; resumes once there is room`, async () => {
      const want = await clean();
      await using sim = await simulator(SIM);
      using dir = workdir();
      const disk = dir.path(full === 'csv' ? 'csv' : 'out');
      mkdirSync(dir.path('out'));
      mkdirSync(dir.path('csv'));
      mount(['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', disk]);
      try {
        // Retries enough to outlast the hold whatever the machine's load.
        const file = pipeline(dir.dir, { sinks: SPLIT_SINKS, retry: { attempts: 10_000, baseDelayMs: 5, maxDelayMs: 50 } });
        sim.inject({ fault: 'status', status: 503, after: 4 });
        let exited = false;
        const running = cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) }).finally(() => {
          exited = true;
        });
        // (A run that ends before committing anything fails the checks below with its own output.)
        await until(() => exited || committedRows(dir.path('out/results.sqlite')) > 0);
        fill(disk);
        sim.clearRules();
        const met = await running;
        expect(met.code, met.stderr).toBe(75);
        expect(met.stderr).toMatch(new RegExp(`the disk holding \\S*/${full === 'csv' ? 'csv' : 'out'}/results\\.${full} is full .*free some space and run the same command again`));
        intact(dir.dir, sim);
        rmSync(join(disk, 'filler'));
        const resumed = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
        expect(resumed.code, resumed.stderr).toBe(0);
        intact(dir.dir, sim);
        expect(stableSqlite(dir.path('out/results.sqlite'))).toEqual(want.sqlite);
        expect(stableCsv(dir.path('csv/results.csv'))).toEqual(want.csv);
      } finally {
        execFileSync('umount', [disk]);
      }
    });
  }

  it('the SQLite file locked by another process: a clear error (exit 75); runs once released', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const file = pipeline(dir.dir);
    expect((await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) })).code).toBe(0);
    const holder = spawn(
      process.execPath,
      ['-e', `const D=require('better-sqlite3');const d=new D(${JSON.stringify(dir.path('out/results.sqlite'))});d.exec('BEGIN EXCLUSIVE');console.log('locked');setInterval(()=>{},1e9)`],
      { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      const [line] = await once(createInterface({ input: holder.stdout }), 'line');
      expect(line).toBe('locked');
      const before = sim.stats().requests;
      const met = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(met.code).toBe(75);
      expect(met.stderr).toMatch(/is locked by another process/);
      expect(sim.stats().requests).toBe(before);
    } finally {
      holder.kill();
      await once(holder, 'exit');
    }
    intact(dir.dir, sim);
    const ran = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(ran.code).toBe(0);
    expect(sqliteRows(dir.path('out/results.sqlite'), 'SELECT status FROM runs')).toEqual([{ status: 'completed' }, { status: 'completed' }]);
  }, 30_000);
});

/** Mounts need root (the tests run as root: chmod would not stop root, a read-only mount or a tiny tmpfs does). */
function mount(args: string[]): void {
  execFileSync('mount', args);
}
