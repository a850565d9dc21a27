// A server's headers decide pauses: a hostile or broken one must not be able to stop a run silently for a day, crash
// it with a date past the end of time, or switch pacing off with a timer Node cannot arm (issue 14, items 5 and 6).
import { describe, expect, it } from 'vitest';
import { MAX_HEADER_DELAY_MS, parseRetryAfter } from '../src/client/retry-after.ts';
import { MAX_TIMER_MS, sleepInSteps } from '../src/schedule/clock.ts';
import { decidePause } from '../src/schedule/pause-rule.ts';
import { readRateLimitHeaders } from '../src/schedule/rate-limit-headers.ts';
import { createScheduler, type SchedulerEvent, virtualClock } from '../src/schedule/index.ts';
import { cli, config, envFor } from './cli-helpers.ts';
import { clientFor, simulator } from './helpers.ts';
import { workdir } from './pipeline-helpers.ts';

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
    expect(met.stderr).toContain('the server asked to wait a year or more');
  });

  it('a pause of more than 2 s is shown with its cause and its end; the run then completes', async () => {
    const met = await runMeeting({ 'retry-after': '3' }, 429);
    expect(met.code, met.stderr).toBe(0);
    expect(met.stderr).toMatch(/pause: 3s, until \d{4}-\d\d-\d\dT[\d:.]+Z \(429, Retry-After 3 s\)/);
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
});
