// A server's headers decide pauses: a hostile or broken one must not be able to stop a run silently for a day, crash
// it with a date past the end of time, or switch pacing off with a timer Node cannot arm (issue 14, items 5 and 6).
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { progressReporter } from '../../src/cli/progress.ts';
import { MAX_HEADER_DELAY_MS, parseRetryAfter } from '../../src/client/retry-after.ts';
import { statusError } from '../../src/client/status-error.ts';
import { toJsonl } from '../../src/index.ts';
import type { RunEvent } from '../../src/run/run.ts';
import { MAX_TIMER_MS, sleepInSteps } from '../../src/schedule/clock.ts';
import { createScheduler, type SchedulerEvent, systemClock, virtualClock } from '../../src/schedule/index.ts';
import { decidePause } from '../../src/schedule/pause-rule.ts';
import { readRateLimitHeaders } from '../../src/schedule/rate-limit-headers.ts';
import { searchPages } from '../../src/sources/search-pages.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { clientFor, simulator } from '../helpers.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

const YEAR = 365 * 24 * 3600 * 1000;
const OK_BODY = { data: [{ title: 'a', url: 'https://a.example/' }] };

/** A run through the command line whose first answer carries `headers` (on a 200, or on a 429). */
async function runMeeting(headers: Record<string, string>, status = 200, extra: Record<string, unknown> = {}) {
  await using sim = await simulator({ seed: 2 });
  using dir = workdir();
  sim.inject({ fault: 'status', status, headers, ...(status === 200 ? { body: OK_BODY } : {}), times: 1 });
  const file = config(dir.dir, { retry: { attempts: 2 }, ...extra }, { queries: ['espresso'], countries: ['us'], maxPages: 3 });
  const result = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
  return { ...result, requests: sim.stats().requests, summary: result.stdout ? JSON.parse(result.stdout) : undefined };
}

describe('header-derived durations are bounded', () => {
  it('Retry-After: an absurd number or a date far ahead reads as a year, never past a valid Date', () => {
    const now = Date.UTC(2026, 10, 22);
    expect(parseRetryAfter('99999999999999999999', now)).toBe(MAX_HEADER_DELAY_MS);
    expect(parseRetryAfter('Fri, 31 Dec 9999 23:59:59 GMT', now)).toBe(MAX_HEADER_DELAY_MS);
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(MAX_HEADER_DELAY_MS).toBe(YEAR);
    // Every bounded value is a valid offset for a Date (the old 1e23 ms threw RangeError in toISOString).
    expect(() => new Date(now + (parseRetryAfter('99999999999999999999', now) ?? 0)).toISOString()).not.toThrow();
    // Said as what it is, not as the bound it was read as.
    const error = statusError({ status: 429, path: '/searchengine/search', headers: { 'retry-after': '99999999999999999999' }, redact: (text) => text, now });
    expect(error.message).toContain('(Retry-After a year or more)');
    expect(error.message).not.toContain('31536000');
  });

  it('RateLimit, RateLimit-Reset and X-RateLimit-Reset windows are bounded to a year', () => {
    expect(readRateLimitHeaders({ ratelimit: 'r=0;t=99999999999999' })?.resetMs).toBe(YEAR);
    expect(readRateLimitHeaders({ 'ratelimit-remaining': '0', 'ratelimit-reset': '1e400' })).toBeUndefined();
    expect(readRateLimitHeaders({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '99999999999999999' })?.resetMs).toBe(YEAR);
    expect(readRateLimitHeaders({ ratelimit: 'r=0;t=30' })?.resetMs).toBe(30_000);
  });

  it('one rule: a pause up to maxRetryAfterMs is slept; a longer one is a quota stop with a valid resumeAt', () => {
    const now = Date.UTC(2026, 10, 22);
    expect(decidePause(4000, 300_000, 'Retry-After 4 s', now)).toEqual({ kind: 'sleep', ms: 4000 });
    const quota = decidePause(100_000_000, 300_000, 'RateLimit', now);
    expect(quota).toMatchObject({ kind: 'quota', ms: 100_000_000, resumeAt: new Date(now + 100_000_000) });
    const absurd = decidePause(1e23, 300_000, 'Retry-After', now);
    expect(absurd).toMatchObject({ kind: 'quota', ms: YEAR, resumeAt: new Date(now + YEAR) });
    expect(absurd.kind === 'quota' && absurd.message).toContain('a year or more');
  });

  it('no timer is armed past 2^31-1 ms: a long sleep is taken in steps', async () => {
    const steps: number[] = [];
    await sleepInSteps(40 * 24 * 3600 * 1000, undefined, async (ms) => {
      steps.push(ms);
    });
    expect(steps).toEqual([MAX_TIMER_MS, 40 * 24 * 3600 * 1000 - MAX_TIMER_MS]);
    expect(Math.max(...steps)).toBeLessThanOrEqual(2 ** 31 - 1);
    const aborted = new AbortController();
    aborted.abort(new Error('stop'));
    await expect(sleepInSteps(10, aborted.signal, async () => undefined)).rejects.toThrow('stop');
  });
});

describe('a hostile server’s pauses through the command line', () => {
  it('4: "RateLimit: r=0;t=100000" on a 200 (27 hours) is a quota stop with when to resume, not a silent sleep', async () => {
    const before = Date.now();
    const met = await runMeeting({ ratelimit: 'r=0;t=100000' });
    expect(met.code, met.stderr).toBe(4);
    expect(met.summary).toMatchObject({ status: 'stopped', reason: 'quota' });
    const resumeAt = Date.parse(met.summary.resumeAt);
    expect(resumeAt - before).toBeGreaterThanOrEqual(100_000_000);
    expect(resumeAt - before).toBeLessThan(100_000_000 + 600_000);
    expect(met.stderr).toContain('rate-limit headers: no requests left, the window resets in 100000 s');
    expect(met.stderr).toContain(`resume after ${met.summary.resumeAt}`);
    // The answer that said so was paid for and kept.
    expect(met.summary.pages.fetched).toBe(1);
  });

  it('4: a reset past what a Node timer can hold (t = 3e6 s) stops too, instead of firing at once and pacing nothing', async () => {
    const met = await runMeeting({ ratelimit: 'r=0;t=3000000' });
    expect(met.code, met.stderr).toBe(4);
    expect(met.summary).toMatchObject({ status: 'stopped', reason: 'quota' });
    expect(met.stderr).not.toContain('TimeoutOverflowWarning');
    expect(met.requests).toBe(1);
  });

  it('4: "Retry-After: 99999999999999999999" on a 429 is a quota stop, no RangeError, no unhandled rejection', async () => {
    const met = await runMeeting({ 'retry-after': '99999999999999999999' }, 429);
    expect(met.code, met.stderr).toBe(4);
    expect(met.stderr).not.toMatch(/RangeError|Invalid time value|unhandled/i);
    expect(met.summary).toMatchObject({ status: 'stopped', reason: 'quota' });
    expect(Number.isNaN(Date.parse(met.summary.resumeAt))).toBe(false);
    expect(met.stderr).toContain('the server asked to wait a year or more (Retry-After a year or more;');
    expect(met.stderr).not.toContain('31536000');
  });

});

describe('long pauses are shown', () => {
  it('a 5 s Retry-After pause (under maxRetryAfterMs) is shown with its cause and its end, in virtual time', async () => {
    const epochAt = Date.UTC(2030, 0, 1);
    const clock = virtualClock(0, epochAt);
    await using sim = await simulator({ clock: clock.now, epoch: clock.epoch });
    using dir = workdir();
    sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '5' }, times: 1 });
    const lines: string[] = [];
    const progress = progressReporter({ mode: 'plain', write: (text) => lines.push(text), now: () => epochAt });
    const summary = await runOn(
      sim,
      { name: 'paused', source: searchPages({ queries: ['q'], maxPages: 1 }), sinks: [toJsonl({ path: dir.path('out.jsonl') })] },
      { clock, onEvent: (event) => progress.onEvent(event) },
    );
    progress.finish(summary, undefined);
    expect(summary.status).toBe('completed');
    // 5 virtual seconds after the start: the end is the clock's wall-clock time, not the system's.
    expect(lines).toContain(`pause: 5s, until ${new Date(epochAt + 5000).toISOString()} (429, Retry-After 5 s)\n`);
    expect(clock.now()).toBeGreaterThanOrEqual(5000);
  });

  it('only pauses longer than 2 s are shown; JSON mode gives the reason, the cause and the end', () => {
    const pause = (ms: number): RunEvent => ({ type: 'pause', ms, reason: 'rate_limit_headers', until: '2030-01-01T00:00:02.000Z', cause: 'rate-limit headers' });
    const plain: string[] = [];
    const shown = progressReporter({ mode: 'plain', write: (text) => plain.push(text) });
    shown.onEvent(pause(2000));
    shown.onEvent(pause(250));
    expect(plain).toEqual([]);
    shown.onEvent(pause(2001));
    expect(plain).toEqual(['pause: 2s, until 2030-01-01T00:00:02.000Z (rate-limit headers)\n']);
    const json: string[] = [];
    progressReporter({ mode: 'json', write: (text) => json.push(text) }).onEvent(pause(90_000));
    expect(JSON.parse(json[0] as string)).toMatchObject({ event: 'pause', ms: 90_000, reason: 'rate_limit_headers', cause: 'rate-limit headers', until: '2030-01-01T00:00:02.000Z' });
  });
});

describe('no timer past 2^31-1 ms', () => {
  it('a reset of 3e6 s (over 2^31 ms) that the run may sleep through keeps it paused: no overflow, nothing sent', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    await using sim = await simulator();
    const client = clientFor(sim);
    sim.inject({ fault: 'status', status: 200, body: OK_BODY, headers: { ratelimit: 'r=0;t=3000000' }, times: 1 });
    // The run is allowed to sleep 40 days (the real system clock: it is its timers that must not overflow).
    const scheduler = createScheduler({ clock: systemClock, concurrency: 1, rateLimit: { maxRetryAfterMs: 40 * 24 * 3600 * 1000 } });
    const events: SchedulerEvent[] = [];
    scheduler.on((event) => events.push(event));
    const send = (q: string) => scheduler.request({ series: q, path: '/searchengine/search' }, (signal) => client.search({ q }, { signal }));
    try {
      expect((await send('first')).ok).toBe(true);
      const second = send('second');
      // An overflowing timer fires after 1 ms, and the second request would be on its way: give it ample time to.
      await delay(200);
      expect(sim.stats().requests).toBe(1);
      expect(warnings).not.toContain('TimeoutOverflowWarning');
      expect(events.find((event) => event.type === 'pause')).toMatchObject({ ms: 3_000_000_000, reason: 'rate_limit_headers' });
      scheduler.stop();
      expect(await second).toMatchObject({ ok: false, kind: 'stopped', reason: 'interrupted' });
    } finally {
      process.off('warning', onWarning);
      scheduler.abort();
      await client.close();
    }
  });
});

describe('rate caps from headers', () => {
  it('a window longer than maxRetryAfterMs does not slow the run to a crawl (1 left in 27 hours)', async () => {
    const clock = virtualClock(0);
    await using sim = await simulator({ clock: clock.now });
    sim.inject({ fault: 'status', status: 200, body: OK_BODY, headers: { ratelimit: 'r=1;t=100000' } });
    const client = clientFor(sim);
    const events: SchedulerEvent[] = [];
    const scheduler = createScheduler({ clock, rate: { requestsPerSecond: 10 }, concurrency: 1 });
    scheduler.on((event) => events.push(event));
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, (_, i) => scheduler.request({ series: `s${i}`, path: '/searchengine/search' }, (signal) => client.search({ q: `q${i}` }, { signal }))),
    );
    await client.close();
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    // 20 requests at 10/s: about 2 virtual seconds. Capped to the header's 1 per 100,000 s (floored at a twentieth of
    // the plan's rate) they took 40.
    expect(clock.now()).toBeLessThan(5_000);
    expect(events.filter((event) => event.type === 'adapt' && event.reason === 'rate_limit_headers')).toEqual([]);
  });

  it('a policy with a window longer than maxRetryAfterMs is no cap either; one with a short window is', async () => {
    const rateCaps = async (policy: string) => {
      const clock = virtualClock(0);
      await using sim = await simulator({ clock: clock.now });
      sim.inject({ fault: 'status', status: 200, body: OK_BODY, headers: { 'ratelimit-policy': policy, ratelimit: 'r=50;t=1' } });
      const client = clientFor(sim);
      const events: SchedulerEvent[] = [];
      const scheduler = createScheduler({ clock, rate: { requestsPerSecond: 10 }, concurrency: 1 });
      scheduler.on((event) => events.push(event));
      await Promise.all(['a', 'b', 'c'].map((q) => scheduler.request({ series: q, path: '/searchengine/search' }, (signal) => client.search({ q }, { signal }))));
      await client.close();
      return events.filter((event) => event.type === 'adapt' && event.reason === 'rate_limit_headers');
    };
    // One request a day (and, absurd, one in 1e400 s): a quota's window, left to the server to say when it runs out.
    expect(await rateCaps('"day";q=1;w=86400, "absurd";q=1;w=1e400')).toEqual([]);
    expect(await rateCaps('"minute";q=60;w=60')).toMatchObject([{ rate: 1 }]);
  });
});
