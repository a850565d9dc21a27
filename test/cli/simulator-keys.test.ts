// A pool of keys offline (issue 40, item 7): `simulate --keys` prints a pool that `run` takes as it is, and `run
// --simulator` / `worker --simulator` give their built-in simulator a pool (`--simulator-keys`, WEBDATA_SIMULATOR_KEYS)
// that the run sends in place of the environment's keys. As a user runs them: child processes, real sockets. No test
// waits a guessed time: each waits for what it can observe (a line printed), within the test's bound.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cli, config, startCli } from '../cli-helpers.ts';
import { TEST_KEY, until } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';

/** The cli-helpers' pipeline: 2 queries × 2 countries × 2 pages, 8 credits. */
const PAGES = 8;

describe('webdata-etl simulate --keys', () => {
  it('prints WEBDATA_API_KEYS, one line a shell takes; run uses every key of it (neither alone has the credits for the run)', async () => {
    using dir = workdir();
    // 5 credits each: 8 pages cannot all go to one key.
    const simulate = startCli(['simulate', '--port', '0', '--keys', 'main:50/5/5,second:50/5/5'], { cwd: dir.dir });
    await simulate.whileRunning(until(() => /^WEBDATA_API_KEYS=.*\n/m.test(simulate.output().stdout)));
    const vars = Object.fromEntries(simulate.output().stdout.trim().split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
    expect(Object.keys(vars)).toEqual(['WEBDATA_BASE_URL', 'WEBDATA_API_KEYS']);
    expect(vars.WEBDATA_API_KEYS).toMatch(/^main=sim_[0-9a-f]{32},second=sim_[0-9a-f]{32}$/);
    const keys = (vars.WEBDATA_API_KEYS as string).split(',').map((entry) => entry.slice(entry.indexOf('=') + 1));

    const run = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: vars });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('2 keys from WEBDATA_API_KEYS (main, second)');
    const summary = JSON.parse(run.stdout);
    expect(summary).toMatchObject({ status: 'completed', pages: { fetched: PAGES } });
    for (const key of keys) expect(run.stdout + run.stderr).not.toContain(key);

    simulate.child.kill('SIGTERM');
    const stopped = await simulate.done;
    expect(stopped.code).toBe(0);
    // What each key was debited, by its label: both took part, and no more than its credits.
    const debited = /credits debited: main (\d+), second (\d+)/.exec(stopped.stderr);
    expect(debited, stopped.stderr).not.toBeNull();
    const [main, second] = [Number(debited?.[1]), Number(debited?.[2])];
    expect(main + second).toBe(summary.credits.spent);
    expect(main).toBeGreaterThan(0);
    expect(second).toBeGreaterThan(0);
  }, 60_000);

  it('2: a bad entry is named by the flag, its place and label (never echoed); --key, --rate, --burst, --credits beside --keys refused', async () => {
    using dir = workdir();
    const bad = await cli(['simulate', '--port', '0', '--keys', 'main:8,main:4,Upper:2,x:0,y:2/0,z:1/1/-3,w:1@soon,sk_live_0123456789abcdefghij'], { cwd: dir.dir });
    expect(bad.code).toBe(2);
    for (const said of [
      '--keys: ',
      'entry 2 (main): the label "main" is given twice',
      'entry 3: its label is not 1 to 32 of a-z, 0-9, _ and - (lower case)',
      'entry 4 (x): the rate must be requests per second, above 0',
      'entry 5 (y): the burst must be a whole number of requests, at least 1',
      'entry 6 (z): the credits must be a whole number, 0 or more',
      'entry 7 (w): what follows @ must be a whole number of requests',
      'entry 8: is not label:rate[/burst[/credits]][@revoke-after]',
    ]) {
      expect(bad.stderr).toContain(said);
    }
    expect(bad.stderr).not.toContain('sk_live_0123456789abcdefghij');
    expect(bad.stdout).toBe('');
    const beside = await cli(['simulate', '--port', '0', '--keys', 'a:1', '--key', TEST_KEY, '--rate', '3'], { cwd: dir.dir });
    expect(beside.code).toBe(2);
    expect(beside.stderr).toContain('--keys gives each key its own limits: --key, --rate are for one key');
    expect(beside.stdout).toBe('');
  }, 60_000);
});

describe('webdata-etl run --simulator with a pool of keys', () => {
  it('--simulator-keys a:8,b:4: the run says "2 keys from the built-in simulator" and uses both; the environment’s own keys are not sent', async () => {
    using dir = workdir();
    // The environment's keys (which the simulator does not know: a 401 if sent) stay out of it.
    const env = { WEBDATA_API_KEYS: `real=${TEST_KEY}` };
    const result = await cli(['run', config(dir.dir), '--simulator', '--simulator-keys', 'a:8/5/5,b:4/5/5'], { cwd: dir.dir, env });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/^simulator at .*\n.*: 2 keys from the built-in simulator \(a, b\) → http:\/\/127\.0\.0\.1:\d+ \(from --simulator\)/);
    const summary = JSON.parse(result.stdout);
    // Every page answered with a 200 and paid: 8 credits, 5 the most one key has, so both keys answered.
    expect(summary).toMatchObject({ status: 'completed', pages: { fetched: PAGES }, credits: { spent: PAGES } });
    expect(summary.requests.byStatus['401']).toBeUndefined();
    expect(summary.destination.credentials).toBe('2 keys from the built-in simulator (a, b)');
  }, 60_000);

  it('a key revoked mid-run (@0: at its first request) is retired; the other delivers every page, exit 0', async () => {
    using dir = workdir();
    const result = await cli(['run', config(dir.dir), '--simulator', '--simulator-keys', 'a:20,b:20@0'], { cwd: dir.dir });
    expect(result.code, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout);
    expect(summary).toMatchObject({ status: 'completed', pages: { fetched: PAGES } });
    expect(summary.requests.byStatus['200']).toBe(PAGES);
    expect(summary.requests.byStatus['401']).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('2 before anything: --simulator-keys without --simulator, a bad entry, a bad WEBDATA_SIMULATOR_KEYS; a pool label the pipeline does not know', async () => {
    using dir = workdir();
    const file = config(dir.dir);
    const alone = await cli(['run', file, '--simulator-keys', 'a:8'], { cwd: dir.dir });
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--simulator-keys gives the built-in simulator its keys: add --simulator');
    const bad = await cli(['run', file, '--simulator', '--simulator-keys', 'a:8,b:fast'], { cwd: dir.dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--simulator-keys: entry 2 (b): the rate must be requests per second');
    const variable = await cli(['run', file, '--simulator'], { cwd: dir.dir, env: { WEBDATA_SIMULATOR_KEYS: 'a:8/0' } });
    expect(variable.code).toBe(2);
    expect(variable.stderr).toContain('WEBDATA_SIMULATOR_KEYS: entry 1 (a): the burst must be');
    // A pipeline's keys.<label> names a key of the simulator's pool, as it would a key of WEBDATA_API_KEYS.
    const unknown = await cli(['run', config(dir.dir, { keys: { c: { requestsPerSecond: 2 } } }), '--simulator', '--simulator-keys', 'a:8,b:4'], { cwd: dir.dir });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('keys.c: no key is labelled "c": the built-in simulator holds "a", "b"');
    for (const refused of [alone, bad, variable]) expect(refused.stderr).not.toContain('simulator at');
    expect(existsSync(dir.path('out'))).toBe(false);
  }, 60_000);
});

describe('webdata-etl worker --simulator with a pool of keys', () => {
  it('WEBDATA_SIMULATOR_KEYS gives its simulator the pool: each run’s keys are its two, not WEBDATA_API_KEY; a bad flag is refused (exit 2)', async () => {
    using dir = workdir();
    const file = config(dir.dir, { name: 'pooled', schedule: { cron: '* * * * * *' }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }] }, { queries: ['a'], countries: ['us'], maxPages: 2 });
    const bad = await cli(['worker', file, '--simulator', '--simulator-keys', 'a'], { cwd: dir.dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--simulator-keys: entry 1: is not label:rate');
    const worker = startCli(['worker', file, '--simulator'], { cwd: dir.dir, env: { WEBDATA_SIMULATOR_KEYS: 'a:8,b:4', WEBDATA_API_KEY: TEST_KEY } });
    await worker.whileRunning(until(() => worker.output().stdout.includes('\n')));
    worker.child.kill('SIGTERM');
    const done = await worker.done;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stderr).toContain('pooled: 2 keys from the built-in simulator (a, b)');
    expect(JSON.parse(done.stdout.split('\n')[0] as string)).toMatchObject({ pipeline: 'pooled', status: 'completed', pages: { fetched: 2 }, requests: { byStatus: { 200: 2 } } });
  }, 60_000);
});

describe('run --simulator, one run after another', () => {
  it('sends with the same key each time: an allowance spent by the first binds the next, which sends nothing the same day', async () => {
    using dir = workdir();
    const file = config(dir.dir, { allowance: { credits: 5, per: 'day' } });
    const first = await cli(['run', file, '--simulator'], { cwd: dir.dir, env: { WEBDATA_API_KEY: TEST_KEY } });
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ status: 'allowance', pages: { fetched: 5 } });
    // A new simulator, the same key: its fingerprint's allowance is spent for the day (before: a random key each run,
    // a new allowance each run, and this one fetched the other 3 pages).
    const second = await cli(['run', file, '--simulator'], { cwd: dir.dir, env: { WEBDATA_API_KEY: TEST_KEY } });
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({ status: 'allowance', pages: { fetched: 5 }, requests: { total: 5 } });
  });
});
