// Keys' allowances in runs (docs/credits.md#allowances), over real sockets against the simulator, with the state in a
// SQLite file: bad allowances refused before anything is sent; two pipelines sharing a key and a state file, the
// second stopped by what the first spent, a different declaration refused; a run stopped by its allowance, sending
// nothing again the same day, and going on page-exact in the next (the store's clock a test's own); a clock that
// jumps a day mid-run; a pool whose one key runs out while the others finish.
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, run, searchPages, toSqlite } from '../../src/index.ts';
import { type Clock, systemClock } from '../../src/schedule/clock.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import type { RunEvent } from '../../src/run/run-types.ts';
import { cli, config } from '../cli-helpers.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { noKeyIn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const SEARCH = { queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 3 };
const env = (url: string) => ({ WEBDATA_BASE_URL: url, WEBDATA_API_KEY: TEST_KEY });
const summaryOf = (stdout: string) => JSON.parse(stdout) as Record<string, unknown> & { status: string; message?: string; resumeAt?: string; pages: { fetched: number } };

/**
 * A clock whose wall time starts at noon, 2026-11-27 UTC, runs as real time does, and moves on a day when told: the
 * SQLite store's clock in a run given it (the period a hold is for is its), far from any midnight but the ones it jumps to.
 */
function movableClock(): Clock & { nextDay(): void } {
  const origin = Date.now();
  let base = Date.parse('2026-11-27T12:00:00.000Z');
  return {
    now: () => systemClock.now(),
    sleep: (ms, signal) => systemClock.sleep(ms, signal),
    epoch: () => base + (Date.now() - origin),
    nextDay() {
      base += 24 * 3_600_000;
    },
  };
}

describe('an allowance refused before anything is sent (exit 2)', () => {
  it('names the field and what is valid: credits, per, time zone, and credits less than one request of the endpoint', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const bad = await cli(['run', config(dir.dir, { allowance: { credits: 2.5, per: 'week', timezone: 'Mars/Olympus_Mons' } })], { cwd: dir.dir, env: env(sim.url) });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('allowance.credits: must be a whole number of credits greater than 0');
    expect(bad.stderr).toContain('allowance.per: must be "day" or "month"');
    expect(bad.stderr).toContain('allowance.timezone: is not a time zone this runtime knows: give an IANA name, such as "Europe/Berlin"');
    const negative = await cli(['run', config(dir.dir, { allowance: { credits: -5, per: 'day' } })], { cwd: dir.dir, env: env(sim.url) });
    expect(negative.code).toBe(2);
    expect(negative.stderr).toContain('allowance.credits: must be a whole number of credits greater than 0');
    const small = await cli(['run', config(dir.dir, { allowance: { credits: 2, per: 'day' }, credits: { weights: { '/searchengine/search': 3 } } })], { cwd: dir.dir, env: env(sim.url) });
    expect(small.code).toBe(2);
    expect(small.stderr).toContain('allowance.credits: 2 is less than one request: a request to /searchengine/search costs 3 credits (credits.weights): give at least 3');
    const token = await cli(['run', config(dir.dir, { allowance: { credits: 10, per: 'day' } })], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_TOKEN: 'eyJ.a.b' } });
    expect(token.code).toBe(2);
    expect(token.stderr).toContain('allowance: an allowance is kept by the API key it binds: send with WEBDATA_API_KEY or WEBDATA_API_KEYS');
    expect(sim.stats().requests).toBe(0);
  });
});

describe("run()'s allowance", () => {
  it("takes the place of the pipeline's (a key's own still stands), and a bad one is refused before anything is sent", async () => {
    await using sim = await simulator();
    using dir = workdir();
    const pipeline = definePipeline({ name: 'given', source: searchPages(SEARCH), stages: [normalize()], sinks: [toSqlite({ path: dir.path('out.sqlite'), table: 'results' })], allowance: { credits: 100, per: 'day' } });
    const bad = await run(pipeline, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, allowance: { credits: 3, per: 'fortnight' as 'day' } }).catch((error: unknown) => error);
    expect(String(bad)).toContain('allowance.per: must be "day" or "month"');
    expect(sim.stats().requests).toBe(0);
    const given = await run(pipeline, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, allowance: { credits: 3, per: 'day' } });
    expect(given).toMatchObject({ status: 'allowance', pages: { fetched: 3 } });
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT credits, per, timezone, pipeline FROM key_allowances')).toEqual([{ credits: 3, per: 'day', timezone: 'UTC', pipeline: 'given' }]);
  });
});

describe('two pipelines sharing a key and a SQLite state file', () => {
  it('the second is stopped by what the first spent; a different declaration is refused naming both; none declared is bound', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const shared = { state: { path: 'state.sqlite' } };
    const allowance = { credits: 7, per: 'day', timezone: 'Europe/Berlin' };
    const first = await cli(['run', config(dir.dir, { name: 'first', ...shared, allowance, sinks: [{ type: 'csv', path: 'first.csv' }] }, SEARCH)], { cwd: dir.dir, env: env(sim.url) });
    expect(first.code, first.stderr).toBe(0);
    const summary = summaryOf(first.stdout);
    expect(summary.status).toBe('allowance');
    expect(summary.pages.fetched).toBe(7);
    expect(summary.message).toMatch(/^key "default": its allowance of 7 credits a day \(Europe\/Berlin\) is spent for \d{4}-\d\d-\d\d; it opens again at \S+Z \(midnight, Europe\/Berlin\)$/);
    expect(summary.allowance).toEqual([{ key: 'default', period: expect.stringMatching(/^\d{4}-\d\d-\d\d$/), opensAt: summary.resumeAt, timezone: 'Europe/Berlin' }]);
    expect(first.stderr).toContain(`resume after ${summary.resumeAt} with the same command`);
    expect(sim.stats().credits.main?.debited).toBe(7);

    // Another pipeline, the same allowance: bound by what the first spent today, it sends nothing.
    const second = await cli(['run', config(dir.dir, { name: 'second', ...shared, allowance, sinks: [{ type: 'csv', path: 'second.csv' }] }, SEARCH)], { cwd: dir.dir, env: env(sim.url) });
    expect(second.code, second.stderr).toBe(0);
    expect(summaryOf(second.stdout)).toMatchObject({ status: 'allowance', pages: { fetched: 0 } });
    // Declaring none, bound all the same.
    const third = await cli(['run', config(dir.dir, { name: 'third', ...shared, sinks: [{ type: 'csv', path: 'third.csv' }] }, SEARCH)], { cwd: dir.dir, env: env(sim.url) });
    expect(third.code, third.stderr).toBe(0);
    expect(summaryOf(third.stdout)).toMatchObject({ status: 'allowance', pages: { fetched: 0 } });
    // Declaring another: refused before anything, naming both pipelines and both allowances, never the key.
    const other = await cli(['run', config(dir.dir, { name: 'other', ...shared, allowance: { credits: 70, per: 'month' }, sinks: [{ type: 'csv', path: 'other.csv' }] }, SEARCH)], {
      cwd: dir.dir,
      env: env(sim.url),
    });
    expect(other.code).toBe(2);
    expect(other.stderr).toContain(
      'allowance: pipeline "other" declares 70 credits a month (UTC) for the key labelled "default", but pipeline "first" recorded 7 credits a day (Europe/Berlin) for the same key (labelled "default" there) in this state database',
    );
    expect(sim.stats().credits.main?.debited).toBe(7);
    // The ledger says whose they were: key, pipeline and period on every row (the key by its fingerprint alone).
    const rows = sqliteRows(dir.path('state.sqlite'), 'SELECT key_label AS label, pipeline, period, count(*) AS n, count(DISTINCT key_fingerprint) AS keys FROM spend GROUP BY 1, 2, 3');
    expect(rows).toEqual([{ label: 'default', pipeline: 'first', period: summary.allowance && (summary.allowance as { period: string }[])[0]?.period, n: 7, keys: 1 }]);
    expect(sqliteRows(dir.path('state.sqlite'), 'SELECT count(*) AS n FROM key_holds')).toEqual([{ n: 0 }]);
    noKeyIn(dir.dir, first.stdout + first.stderr + other.stderr, [TEST_KEY]);
  });
});

describe('a run stopped by its allowance', () => {
  it('sends nothing again the same day, and in the next goes on where it stopped: no page fetched twice, none missing', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const pipeline = (path: string) =>
      definePipeline({ name: 'daily', source: searchPages(SEARCH), stages: [normalize()], sinks: [toSqlite({ path: dir.path(path), table: 'results' })], allowance: { credits: 8, per: 'day' }, rate: { concurrency: 2 } });
    const clock = movableClock();
    const options = { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, clock };
    const first = await run(pipeline('out.sqlite'), options);
    expect(first).toMatchObject({ status: 'allowance', pages: { fetched: 8 }, resumeAt: '2026-11-28T00:00:00.000Z' });
    const again = await run(pipeline('out.sqlite'), options);
    expect(again).toMatchObject({ status: 'allowance', runId: first.runId, pages: { fetched: 8 } });
    expect(sim.stats().credits.main?.debited).toBe(8);
    clock.nextDay();
    const next = await run(pipeline('out.sqlite'), options);
    expect(next).toMatchObject({ status: 'allowance', runId: first.runId, pages: { fetched: 16 } });
    clock.nextDay();
    const last = await run(pipeline('out.sqlite'), options);
    expect(last).toMatchObject({ status: 'completed', runId: first.runId, pages: { fetched: 18 } });
    // Page-exact: every page of the plan paid once, and the rows those of a run with no allowance.
    const pages = sim.log().filter((entry) => entry.status === 200).map((entry) => entry.query);
    expect(pages).toHaveLength(18);
    expect(new Set(pages).size).toBe(18);
    await using reference = await simulator();
    const whole = await run(definePipeline({ name: 'whole', source: searchPages(SEARCH), stages: [normalize()], sinks: [toSqlite({ path: dir.path('whole.sqlite'), table: 'results' })] }), { baseUrl: reference.url, apiKey: TEST_KEY, env: {} });
    expect(whole.status).toBe('completed');
    const rows = (path: string) => sqliteRows(dir.path(path), 'SELECT query, country, page, position, url FROM results ORDER BY query, country, page, position');
    expect(rows('out.sqlite')).toEqual(rows('whole.sqlite'));
    // Each day's credits under its own period.
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT period, sum(credits) AS credits FROM spend GROUP BY period ORDER BY period')).toEqual([
      { period: '2026-11-27', credits: 8 },
      { period: '2026-11-28', credits: 8 },
      { period: '2026-11-29', credits: 2 },
    ]);
  });

  it('a clock that jumps across midnight mid-run: the next hold is in the new day, and the run goes on', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const clock = movableClock();
    let answers = 0;
    const onEvent = (event: RunEvent) => {
      if (event.type === 'response' && ++answers === 3) clock.nextDay();
    };
    const pipeline = definePipeline({ name: 'jump', source: searchPages(SEARCH), stages: [normalize()], sinks: [toSqlite({ path: dir.path('out.sqlite'), table: 'results' })], allowance: { credits: 15, per: 'day' }, rate: { concurrency: 1 } });
    const summary = await run(pipeline, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, clock, onEvent });
    expect(summary).toMatchObject({ status: 'completed', pages: { fetched: 18 } });
    // Three answers on the 27th (one at a time: the jump came before the fourth was sent); what the 27th's hold had
    // left went back, and the rest was held in the 28th.
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT period, sum(credits) AS credits FROM spend GROUP BY period ORDER BY period')).toEqual([
      { period: '2026-11-27', credits: 3 },
      { period: '2026-11-28', credits: 15 },
    ]);
    expect(sim.stats().credits.main?.debited).toBe(18);
  });
});

describe('a pool of keys with an allowance on one', () => {
  it('the key out of its allowance leaves the pool; the others finish the run (completed, exit 0), and it is said', async () => {
    const KEYS = { fast: 'sk_fast_allow_1a2b3c4d5e6f', slow: 'sk_slow_allow_9f8e7d6c5b4a' };
    await using sim = await startSimulator({ keys: [{ key: KEYS.fast, name: 'fast' }, { key: KEYS.slow, name: 'slow' }] });
    using dir = workdir();
    const file = config(dir.dir, { rate: { concurrency: 2 }, keys: { fast: { allowance: { credits: 3, per: 'month', timezone: 'Asia/Kathmandu' } } } }, SEARCH);
    const result = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: `fast=${KEYS.fast},slow=${KEYS.slow}` } });
    expect(result.code, result.stderr).toBe(0);
    const summary = summaryOf(result.stdout) as ReturnType<typeof summaryOf> & { keys: { label: string; retired: { reason: string; message: string } | null }[] };
    expect(summary.status).toBe('completed');
    expect(summary.pages.fetched).toBe(18);
    expect(sim.stats().credits.fast?.debited).toBe(3);
    expect(sim.stats().credits.slow?.debited).toBe(15);
    const fast = summary.keys.find((key) => key.label === 'fast');
    expect(fast?.retired).toMatchObject({ reason: 'allowance', message: expect.stringMatching(/^key "fast": its allowance of 3 credits a month \(Asia\/Kathmandu\) is spent for \d{4}-\d\d; it opens again at \S+Z \(the first of the month, Asia\/Kathmandu\)$/) });
    expect(summary.keys.find((key) => key.label === 'slow')?.retired).toBeNull();
    expect(result.stderr).toContain('key fast out of its allowance');
    expect(result.stderr).not.toContain('fix the key');
    noKeyIn(dir.dir, result.stdout + result.stderr, Object.values(KEYS));
  });
});
