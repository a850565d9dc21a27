// Outputs to stdout (issue 38 §17): `--out -` is stdout (it wrote a file named "-"), `--out /dev/stdout` is written
// where it is (it failed with ENOENT on a temporary file beside /proc/<pid>/fd/pipe:[…]), and a reader that goes away
// (`| head`) ends the command quietly with exit 0 (it printed "write EPIPE", exit 1, or an unhandled 'error' event).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { handMadeDatabase } from '../analytics/analytics-fixture.ts';
import { cli, config, envFor, ROOT, startCli } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';

/** The hand-made results, and `rows` more whose raw answers make an export of some megabytes: more than a pipe holds. */
function largeDatabase(path: string, rows = 20_000): string {
  handMadeDatabase(path);
  const db = new Database(path);
  const insert = db.prepare(`INSERT INTO results VALUES ('r', 'q', 'us', 'en', 1, ?, ?, 'Title', 'https://x.com/a', 'x.com', NULL, 'k', 't', ?)`);
  const raw = JSON.stringify({ padding: 'x'.repeat(400) });
  db.transaction(() => {
    for (let i = 0; i < rows; i += 1) insert.run(i, i, raw);
  })();
  db.close();
  return path;
}

/** The command with its stdout read up to the first chunk, then closed, as `| head -c 1` does. */
async function readerLeavesEarly(args: string[], cwd: string) {
  const running = startCli(args, { cwd });
  running.child.stdout.once('data', () => running.child.stdout.destroy());
  return running.done;
}

describe('stdout as an output', () => {
  it('export --out - and --out /dev/stdout write to stdout, as no --out does; no file named "-"', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const plain = await cli(['export', 'hand.sqlite', '--report', 'items'], { cwd: dir.dir });
    expect(plain.code).toBe(0);
    expect(plain.stdout.split('\r\n').length).toBeGreaterThan(10);
    for (const out of ['-', '/dev/stdout']) {
      const result = await cli(['export', 'hand.sqlite', '--report', 'items', '--out', out], { cwd: dir.dir });
      expect({ out, code: result.code, stderr: result.stderr }).toEqual({ out, code: 0, stderr: expect.stringMatching(/^\d+ rows/) });
      expect(result.stdout).toBe(plain.stdout);
    }
    expect(existsSync(dir.path('-'))).toBe(false);
  });

  it('--out naming another pipe (/dev/fd/3, as bash\'s >(…) gives one) is written in place, not beside it', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const plain = await cli(['export', 'hand.sqlite', '--report', 'items'], { cwd: dir.dir });
    // fd 3 is the pipe to cat, stdout /dev/null: /dev/fd/3 resolves to /proc/<pid>/fd/pipe:[…], a name no file has.
    const command = (args: string) => `${[process.execPath, '--conditions=webdata-etl:source', join(ROOT, 'src/cli/main.ts')].map((a) => `'${a}'`).join(' ')} ${args} 3>&1 >/dev/null | cat`;
    for (const [name, args] of [
      ['export', 'export hand.sqlite --report items --out /dev/fd/3'],
      ['report', 'report hand.sqlite --out /dev/fd/3'],
    ] as const) {
      const result = spawnSync('sh', ['-c', command(args)], { cwd: dir.dir, encoding: 'utf8' });
      expect({ name, status: result.status, stderr: result.stderr }).toEqual({ name, status: 0, stderr: expect.not.stringContaining('ENOENT') });
      if (name === 'export') expect(result.stdout).toBe(plain.stdout);
      else expect(result.stdout.startsWith('<!doctype html>')).toBe(true);
    }
  });

  it('report --out - and --out /dev/stdout write the page to stdout', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    for (const out of ['-', '/dev/stdout']) {
      const result = await cli(['report', 'hand.sqlite', '--out', out], { cwd: dir.dir });
      expect({ out, code: result.code }).toEqual({ out, code: 0 });
      expect(result.stdout.startsWith('<!doctype html>')).toBe(true);
      expect(result.stdout.trimEnd().endsWith('</html>')).toBe(true);
    }
    expect(existsSync(dir.path('-'))).toBe(false);
  });

  it('run --summary-json - (or /dev/stdout) is stdout, where the summary goes anyway: once', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, {}, { queries: ['x'], countries: ['us'], maxPages: 1 });
    for (const out of ['-', '/dev/stdout']) {
      const result = await cli(['run', file, '--fresh', '--summary-json', out], { cwd: dir.dir, env: envFor(sim.url) });
      expect({ out, code: result.code }).toEqual({ out, code: 0 });
      expect(JSON.parse(result.stdout)).toMatchObject({ status: 'completed' });
    }
    expect(existsSync(dir.path('-'))).toBe(false);
    // With a sink writing JSON Lines to stdout, "-" would mix the summary into the rows: refused before any request.
    const taken = config(dir.dir, { sinks: [{ type: 'jsonl', path: '-' }] }, { queries: ['x'], countries: ['us'], maxPages: 1 });
    const before = sim.stats().requests;
    const refused = await cli(['run', taken, '--summary-json', '-'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--summary-json -: stdout carries the rows of a sink');
    expect(sim.stats().requests).toBe(before);
  });

  it('a reader that goes away after the first chunk ends the export quietly, exit 0: stdout, "-" and /dev/stdout', async () => {
    using dir = workdir();
    largeDatabase(dir.path('large.sqlite'));
    expect(readFileSync(dir.path('large.sqlite')).length).toBeGreaterThan(8 * 1024 * 1024);
    for (const out of [[], ['--out', '-'], ['--out', '/dev/stdout']]) {
      for (const format of ['csv', 'jsonl']) {
        const result = await readerLeavesEarly(['export', 'large.sqlite', '--report', 'items', '--format', format, ...out], dir.dir);
        expect({ out, format, code: result.code, stderr: result.stderr }).toEqual({ out, format, code: 0, stderr: '' });
      }
    }
  });

  it('run with a sink writing JSON Lines to stdout: a reader that goes away stops the run (resumable, 130), no unhandled EPIPE', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { sinks: [{ type: 'jsonl', path: '-' }] }, { queries: ['q'], countries: ['us'], maxPages: 3 });
    // Page 1 is held until the reader has gone, so that it is written to a closed pipe; page 2 until the run says it
    // stops, so that the run cannot end before (a series asks for its pages one after the other).
    const first = sim.park({ q: 'q', page: 1 });
    const second = sim.park({ q: 'q', page: 2 });
    const running = startCli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    const closed = new Promise<void>((resolve) => running.child.stdout.once('close', resolve));
    running.child.stdout.destroy();
    await closed;
    await running.whileRunning(first.reached());
    first.release();
    await running.printed('stdout closed (EPIPE): stopping');
    second.release();
    const result = await running.done;
    expect(result.code).toBe(130);
    expect(result.stderr).toContain('stop: stdout closed (EPIPE): nothing new is sent');
    expect(result.stderr).not.toMatch(/Unhandled|node:events|\n\s+at /);
    // Resumable: the same command, its stdout read this time, takes the run up and ends it.
    const resumed = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(resumed.code).toBe(0);
    expect(resumed.stderr).toContain('resuming run');
  });
});
