import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, config, envFor, pipelineFile, ROOT, startCli } from '../cli-helpers.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';

describe('webdata-etl run', () => {
  it('0: runs a JSON config to the end; the summary on stdout and in --summary-json matches the simulator', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    const result = await cli(['run', config(dir.dir), '--summary-json', 'out/summary.json'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout);
    expect(summary).toMatchObject({ status: 'completed', pipeline: 'cli-test', pages: { fetched: 8 } });
    expect(JSON.parse(readFileSync(dir.path('out/summary.json'), 'utf8'))).toEqual(summary);
    const stats = sim.stats();
    expect(summary.requests.total).toBe(stats.requests);
    expect(summary.requests.byStatus).toEqual(stats.byStatus);
    expect(summary.credits.spent).toBe(stats.credits.main?.debited);
    expect(sqliteRows(dir.path('out/results.sqlite'), 'SELECT COUNT(*) AS n FROM results')).toEqual([{ n: summary.items.written }]);
    // Progress and the human summary go to stderr; the key never shows.
    expect(result.stderr).toContain('cli-test: completed');
    expect(result.stderr + result.stdout).not.toContain(TEST_KEY);
  });

  it('2: --summary-json may not name the state store, its -wal or an output; the summary file is created 0600', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    const file = config(dir.dir);
    for (const target of ['out/results.sqlite', 'out/results.sqlite-wal', 'out/../out/results.csv']) {
      const refused = await cli(['run', file, '--summary-json', target], { cwd: dir.dir, env: envFor(sim.url) });
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toContain('--summary-json');
      expect(refused.stderr).toContain('a file this run writes');
    }
    expect(sim.stats().requests).toBe(0);
    const result = await cli(['run', file, '--summary-json', 'out/summary.json'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(0);
    expect(statSync(dir.path('out/summary.json')).mode & 0o777).toBe(0o600);
  });

  it('2: the library’s options are named as flags on the command line (--fresh, --resume)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const both = await cli(['run', config(dir.dir), '--fresh', '--resume'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('webdata-etl: --fresh and --resume contradict each other: choose one');
    const nothing = await cli(['run', config(dir.dir), '--resume'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('nothing to resume: this pipeline has no runs yet (run it without --resume)');
    expect(sim.stats().requests).toBe(0);
  });

  it('2: a bad field is reported by its path, before any request', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const bad = config(dir.dir, { rate: { requestsPerSecond: -1 } }, { countries: ['us', 'uk'], maxPages: 0 });
    const result = await cli(['run', bad], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('search.countries.1: "uk" is not an ISO 3166-1 alpha-2 country code; did you mean "gb"?');
    expect(result.stderr).toContain('search.maxPages');
    expect(result.stderr).toContain('rate.requestsPerSecond');
    expect(result.stderr).not.toContain('    at ');
    expect(sim.stats().requests).toBe(0);
  });

  it('2: every variable a run lacks, at once: no address, no key, webhooks without a secret (were three runs)', async () => {
    using dir = workdir();
    const notifying = config(dir.dir, { notify: { webhooks: [{ url: 'https://hooks.example.com/webdata' }] } });
    const unset = await cli(['run', notifying], { cwd: dir.dir });
    expect(unset.code).toBe(2);
    for (const variable of ['api.baseUrl: set WEBDATA_BASE_URL', 'apiKey: no credentials: set WEBDATA_API_KEY', 'notify.webhooks: set WEBDATA_WEBHOOK_SECRET']) {
      expect(unset.stderr).toContain(variable);
    }
  });

  it('2: every bad field of a .ts file at once, with "did you mean" for an unknown field, as a JSON config says them', async () => {
    await using sim = await simulator();
    using dir = workdir();
    // A .ts file whose source, sinks and definition each have a mistake: all of them (was the source's alone, the
    // first call to throw), as a JSON config says them.
    const bad = (sinks: string) =>
      `import { definePipeline, normalize, searchPages, toCsv, toSqlite } from ${JSON.stringify(join(ROOT, 'src/index.ts'))};\n` +
      `export default definePipeline({ name: 'bad', source: searchPages({ queries: ['x'], countries: ['uk'], maxPage: 3 } as never), stages: [normalize()], ${sinks}, rate: { requestsPerSecond: -1 } } as never);\n`;
    writeFileSync(dir.path('bad.ts'), bad("sinks: [toSqlite({ path: 'out/a.sqlite', table: 'drop table;' }), toCsv({ path: '' })], sink: []"));
    const module = await cli(['run', 'bad.ts'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(module.code).toBe(2);
    for (const problem of [
      'search.maxPage: unknown field; did you mean "maxPages"?',
      'search.countries.0: "uk" is not an ISO 3166-1 alpha-2 country code; did you mean "gb"?',
      'sqlite.table: must be a column name',
      'csv.path: must be a file path',
      'rate.requestsPerSecond: ',
      'sink: unknown field; did you mean "sinks"?',
    ]) {
      expect(module.stderr).toContain(problem);
    }
    // A bad builder whose result the pipeline does not use is refused still (as when it threw).
    writeFileSync(
      dir.path('unused.ts'),
      `import { definePipeline, searchPages, toCsv, toSqlite } from ${JSON.stringify(join(ROOT, 'src/index.ts'))};\n` +
        `toSqlite({ path: 'out/b.sqlite', table: '1x' });\n` +
        `export default definePipeline({ name: 'unused', source: searchPages({ queries: ['x'] }), sinks: [toCsv({ path: 'out/a.csv' })] });\n`,
    );
    const unused = await cli(['run', 'unused.ts'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(unused.code).toBe(2);
    expect(unused.stderr).toContain('sqlite.table: must be a column name');
    expect(sim.stats().requests).toBe(0);
  });

  it('2: an unknown field of a JSON config is named with the field it is likely a slip of', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const json = await cli(['run', config(dir.dir, { sink: [] }, { maxPage: 3 })], { cwd: dir.dir, env: envFor(sim.url) });
    expect(json.code).toBe(2);
    expect(json.stderr).toContain('search.maxPage: unknown field; did you mean "maxPages"?');
    expect(json.stderr).toContain('sink: unknown field; did you mean "sinks"?');
    expect(sim.stats().requests).toBe(0);
  });

  it('2: a key in the pipeline file is refused; a missing base URL is an error, never a fallback', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const withKey = await cli(['run', config(dir.dir, { api: { baseUrl: sim.url, apiKey: 'nope' } })], { cwd: dir.dir, env: { WEBDATA_API_KEY: TEST_KEY } });
    expect(withKey.code).toBe(2);
    expect(withKey.stderr).toContain('api.apiKey: the API key is never read from a pipeline file');
    const noUrl = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: { WEBDATA_API_KEY: TEST_KEY } });
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toContain('api.baseUrl: set WEBDATA_BASE_URL');
    const usage = await cli(['run'], { cwd: dir.dir });
    expect(usage.code).toBe(2);
    const unknown = await cli(['run', config(dir.dir), '--bogus'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(unknown.code).toBe(2);
    expect(sim.stats().requests).toBe(0);
  });

  it('flags win over the environment, which wins over the file', async () => {
    await using fileSim = await simulator();
    await using envSim = await simulator();
    await using flagSim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { api: { baseUrl: fileSim.url } }, { queries: ['x'], countries: ['us'], maxPages: 1 });
    expect((await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_API_KEY: TEST_KEY } })).code).toBe(0);
    expect((await cli(['run', file], { cwd: dir.dir, env: envFor(envSim.url) })).code).toBe(0);
    expect((await cli(['run', file, '--base-url', flagSim.url], { cwd: dir.dir, env: envFor(envSim.url) })).code).toBe(0);
    expect([fileSim.stats().requests, envSim.stats().requests, flagSim.stats().requests]).toEqual([1, 1, 1]);
  });

  it('3: a refused key', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const result = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: envFor(sim.url, 'wrong_key_1234567') });
    expect(result.code).toBe(3);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: 'stopped', reason: 'unauthorized' });
  });

  it('3: a refused key or token: the advice is to fix that variable (the run then resumes), not to run it again as it is', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir);
    const key = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url, 'wrong_key_1234567') });
    expect(key.code).toBe(3);
    expect(key.stderr).toContain('fix the key in WEBDATA_API_KEY, then run the same command: the run resumes where it stopped');
    const token = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_TOKEN: 'wrong.token.value' } });
    expect(token.code).toBe(3);
    expect(token.stderr).toContain('fix the token in WEBDATA_TOKEN (a JWT may have expired), then run the same command');
    for (const { stderr } of [key, token]) expect(stderr).not.toContain('run the same command again to resume');
    // Fixed, the same command resumes the run the refusals stopped.
    const fixed = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(fixed.code).toBe(0);
    expect(fixed.stderr).toMatch(/resuming run/);
  });

  it('4: credits, a forbidden endpoint, a quota', async () => {
    using dir = workdir();
    for (const plan of [{ credits: 0 }, { endpoints: ['/video/search'] }, { quota: { requests: 1, windowMs: 86_400_000 } }]) {
      await using sim = await simulator({ keys: [{ key: TEST_KEY, name: 'main', ...plan }] });
      const result = await cli(['run', config(dir.dir), '--fresh'], { cwd: dir.dir, env: envFor(sim.url) });
      expect(result.code).toBe(4);
      expect(['payment_required', 'forbidden', 'quota']).toContain(JSON.parse(result.stdout).reason);
    }
  });

  it('5: finished with failed series', async () => {
    await using sim = await simulator();
    using dir = workdir();
    sim.inject({ fault: 'status', status: 400, match: { q: 'kettle' } });
    const result = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(5);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: 'failed_series', series: { failed: 2, failedBy: { bad_request: 2 } } });
  });

  it('75: the 429 retry budget spent, and a stall', async () => {
    await using sim = await simulator({ retryAfter: 'none' });
    using dir = workdir();
    sim.inject({ fault: 'status', status: 429 });
    const spent = config(dir.dir, { rateLimit: { retries: 2, baseDelayMs: 1, maxDelayMs: 5 } }, { queries: ['x'], countries: ['us'] });
    const result = await cli(['run', spent], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(75);
    expect(JSON.parse(result.stdout).series.failedBy).toEqual({ rate_limited: 1 });

    // Another pipeline: outputs of its own (the first one's files are claimed by it).
    const stalled = config(
      dir.dir,
      { name: 'stalled', rateLimit: { retries: 1000, baseDelayMs: 20, maxDelayMs: 20, stallAfterMs: 200 }, sinks: [{ type: 'sqlite', path: 'stalled/results.sqlite' }] },
      { queries: ['y'], countries: ['us'] },
    );
    const stall = await cli(['run', stalled], { cwd: dir.dir, env: envFor(sim.url) });
    expect(stall.code).toBe(75);
    expect(JSON.parse(stall.stdout)).toMatchObject({ status: 'stopped', reason: 'stall' });
  });

  it('75: another run of the pipeline holds the lease', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir);
    // The first run is held in flight by the simulator until the second has been refused: however slowly the machine
    // starts processes, the first cannot finish before the second asks for the lease.
    const gate = sim.park();
    const first = startCli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    await first.whileRunning(gate.reached());
    const second = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    gate.release();
    expect(second.code).toBe(75);
    expect(second.stderr).toContain('is already running');
    expect((await first.done).code).toBe(0);
  });

  it('130: interrupted by Ctrl-C, then resumed by the same command; resume after SIGKILL too', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, {}, { queries: ['a', 'b', 'c', 'd'], maxPages: 3 });
    // The signals land while the run is held in flight by the simulator, never after a guessed moment: a run that
    // finished before its signal (a loaded machine) would exit 0.
    const d = sim.park({ q: 'd' });
    const running = startCli(['run', file, '--log-format', 'json'], { cwd: dir.dir, env: envFor(sim.url) });
    // A series ended (pages committed), and "d" is asked for and held: the run cannot end before Ctrl-C.
    await running.printed('"event":"series"');
    await running.whileRunning(d.reached());
    running.child.kill('SIGINT');
    // The answers in flight are let go only once the stop is under way, so that the run stops rather than ends.
    await running.printed('SIGINT: stopping');
    d.release();
    const interrupted = await running.done;
    expect(interrupted.code).toBe(130);
    expect(JSON.parse(interrupted.stdout).status).toBe('interrupted');

    // The next invocation resumes; it is killed with its requests held in flight.
    const all = sim.park();
    const doomed = startCli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    await doomed.printed('resuming run');
    await doomed.whileRunning(all.reached());
    doomed.child.kill('SIGKILL');
    const killed = await doomed.done;
    all.release();
    expect(killed.code).toBe(null);

    const resumed = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(resumed.code).toBe(0);
    expect(resumed.stderr).toContain('resuming run');
    const summary = JSON.parse(resumed.stdout);
    expect(summary.runId).toBe(JSON.parse(interrupted.stdout).runId);
    expect(summary.status).toBe('completed');
    // Paid and not committed: at most the requests in flight at the kill (the concurrency, 4).
    expect(sim.stats().byStatus['200']).toBeLessThanOrEqual(summary.pages.fetched + 4);
  });

  it('1: anything unexpected, with a message and no stack trace', async () => {
    await using sim = await simulator();
    using dir = workdir();
    // A stage that fails at run time (a pipeline file that fails to load is bad input: exit 2).
    const broken = join(dir.dir, 'broken.ts');
    writeFileSync(
      broken,
      `import { normalize, searchPages, toCsv } from ${JSON.stringify(join(ROOT, 'src/index.ts'))};\n` +
        "async function* broken() { throw new Error('this stage is broken'); }\n" +
        "export default { name: 'broken', source: searchPages({ queries: ['x'], maxPages: 1 }), stages: [normalize(), broken], sinks: [toCsv({ path: 'out/b.csv' })] };\n",
    );
    const result = await cli(['run', broken], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('this stage is broken');
    expect(result.stderr).not.toMatch(/\n\s+at .*:\d+:\d+/);
  });
});

describe('JSON Lines to stdout', () => {
  it('stdout carries only the lines; the summary goes to stderr', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { sinks: [{ type: 'jsonl', path: '-' }] }, { queries: ['x'], countries: ['us'], maxPages: 2 });
    const result = await cli(['run', file, '--quiet'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(lines).toHaveLength(20);
    expect(lines[0]).toMatchObject({ query: 'x', page: 1, position: 1 });
    expect(typeof lines[0].raw).toBe('object');
    expect(JSON.parse(result.stderr)).toMatchObject({ status: 'completed', items: { written: 20 } });
  });
});

describe('webdata-etl export', () => {
  it('writes reports to files in each format, or to stdout', async () => {
    await using sim = await simulator();
    using dir = workdir();
    expect((await cli(['run', config(dir.dir)], { cwd: dir.dir, env: envFor(sim.url) })).code).toBe(0);
    const toStdout = await cli(['export', 'out/results.sqlite', '--report', 'rankings', '--country', 'gb'], { cwd: dir.dir });
    expect(toStdout.code).toBe(0);
    const lines = toStdout.stdout.trim().split('\r\n');
    expect(lines[0]).toBe('query,country,lang,rank,title,url,domain,page,position,dedupe_key,run_id,fetched_at,age_runs');
    expect(lines.slice(1).every((line) => line.includes(',gb,'))).toBe(true);
    expect(toStdout.stderr).toContain(`${lines.length - 1} rows`);
    for (const format of ['csv', 'jsonl', 'parquet']) {
      const result = await cli(['export', 'out/results.sqlite', '--report', 'domains', '--format', format, '--out', `out/domains.${format}`], { cwd: dir.dir });
      expect(result.code).toBe(0);
      expect(readFileSync(dir.path(`out/domains.${format}`)).length).toBeGreaterThan(0);
    }
    const parquetToStdout = await cli(['export', 'out/results.sqlite', '--report', 'items', '--format', 'parquet'], { cwd: dir.dir });
    expect(parquetToStdout.code).toBe(2);
    expect(parquetToStdout.stderr).toContain('Parquet is written to a file');
  });
});

describe('estimate, runs, help, version', () => {
  it('estimate prints the worst case and sends nothing', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { budget: { maxCredits: 5 } }, { queries: ['a', 'b', 'a', ' '], maxPages: 3 });
    const text = await cli(['estimate', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('requests (worst case): 12');
    expect(text.stdout).toContain('does not fit');
    expect(text.stdout).toContain('queries dropped: 1 duplicate, 1 blank');
    const json = JSON.parse((await cli(['estimate', file, '--json'], { cwd: dir.dir, env: envFor(sim.url) })).stdout);
    expect(json).toMatchObject({ series: 4, maxPagesPerSeries: 3, requests: 12, credits: 12, budget: 5, withinBudget: false });
    expect(sim.stats().requests).toBe(0);
  });

  it('runs lists the history of a pipeline, from its file or its database', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, {}, { queries: ['x'], countries: ['us'], maxPages: 1 });
    await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    const table = await cli(['runs', file], { cwd: dir.dir });
    expect(table.code).toBe(0);
    expect(table.stdout.trim().split('\n')).toHaveLength(3);
    expect(table.stdout).toContain('completed');
    const json = (await cli(['runs', 'out/results.sqlite', '--json'], { cwd: dir.dir })).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(json).toHaveLength(2);
    expect(json[0]).toMatchObject({ pipeline: 'cli-test', status: 'completed', requests: 1, rows: expect.any(Number) });
    // --state is checked as run checks it.
    const badState = await cli(['runs', file, '--state', 'not-a-url'], { cwd: dir.dir });
    expect(badState.code).toBe(2);
    expect(badState.stderr).toMatch(/--state must be a PostgreSQL URL/);
  });

  it('--help for every command, --version, and an unknown command', async () => {
    using dir = workdir();
    for (const command of ['run', 'estimate', 'runs', 'spend', 'export', 'simulate']) {
      const help = await cli([command, '--help'], { cwd: dir.dir });
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`Usage: webdata-etl ${command}`);
    }
    const main = await cli(['--help'], { cwd: dir.dir });
    expect(main.stdout).toContain('Exit codes');
    expect((await cli(['--version'], { cwd: dir.dir })).stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    const unknown = await cli(['frobnicate'], { cwd: dir.dir });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "frobnicate"');
  });
});

describe('pipeline files', () => {
  it('node pipelines/rank-tracking.ts runs as a user would run it, importing the built package', async () => {
    using dir = workdir();
    const { code, stdout } = await pipelineFile(join(ROOT, 'pipelines/rank-tracking.ts'), ['--simulator', '--quiet'], { cwd: dir.dir });
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ pipeline: 'rank-tracking', status: 'completed' });
    expect(sqliteRows(dir.path('data/rank.sqlite'), 'SELECT COUNT(*) AS n FROM results')[0]?.n).toBeGreaterThan(0);
    expect(readFileSync(dir.path('data/rank.csv'), 'utf8').startsWith('run_id,query,')).toBe(true);
  });

  it('node <file> with an invalid config says what webdata-etl run says, without a stack trace, exit 2 (was an uncaught ValidationError, exit 1)', async () => {
    using dir = workdir();
    const file = join(ROOT, 'test/fixtures/invalid-country.ts');
    const direct = await pipelineFile(file, ['--simulator'], { cwd: dir.dir });
    const viaCli = await cli(['run', file, '--simulator'], { cwd: dir.dir });
    expect(viaCli.code).toBe(2);
    expect(viaCli.stderr).toMatch(/search\.countries\.0: "uk" is not an ISO 3166-1 alpha-2 country code; did you mean "gb"\?/);
    expect(direct).toEqual({ code: 2, stdout: '', stderr: viaCli.stderr });
    expect(existsSync(dir.path('data'))).toBe(false);
  });

  it('the JSON example config validates', async () => {
    using dir = workdir();
    const result = await cli(['estimate', join(ROOT, 'pipelines/rank-tracking.json')], { cwd: dir.dir });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('series: 4');
  });
});
