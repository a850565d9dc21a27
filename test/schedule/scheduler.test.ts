import { describe, expect, it } from 'vitest';
import { type SearchResponse } from '../../src/client/index.ts';
import { createCreditMeter, createPacer, type CreditMeter, createScheduler, estimate, type Outcome, type Pacer, type SchedulerEvent, type SchedulerOptions, virtualClock } from '../../src/schedule/index.ts';
import { type Simulator } from '../../src/simulator/index.ts';
import { clientFor, simulator, TEST_KEY } from '../helpers.ts';

/** A scheduler and a client on one simulator, all in the same virtual time. */
async function setup(simOptions: Parameters<typeof simulator>[0] = {}, schedulerOptions: SchedulerOptions = {}) {
  const clock = virtualClock(1_000_000);
  const sim = await simulator({ clock: clock.now, ...simOptions });
  const client = clientFor(sim, { timeoutMs: 2000 });
  const events: SchedulerEvent[] = [];
  const scheduler = createScheduler({ clock, random: () => 0.5, ...schedulerOptions });
  scheduler.on((event) => events.push(event));
  const search = (q: string, series = q, page = 1) =>
    scheduler.request({ series, path: '/searchengine/search' }, (signal) => client.search({ q, page }, { signal }));
  return {
    clock,
    sim,
    client,
    scheduler,
    events,
    search,
    async [Symbol.asyncDispose]() {
      await client.close();
      await sim.close();
    },
  };
}

const statuses = (sim: Simulator) => sim.log().map((entry) => entry.status);

describe('pacing', () => {
  it('spaces requests evenly at the configured rate', async () => {
    await using t = await setup({}, { rate: { requestsPerSecond: 5 }, concurrency: 8 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => t.search(`q${i}`)));
    const times = t.sim.log().map((entry) => entry.at);
    const gaps = times.slice(1).map((at, i) => at - (times[i] as number));
    expect(gaps).toHaveLength(9);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(200);
  });

  it('accepts a rate as requests per interval', async () => {
    await using t = await setup({}, { rate: { requests: 30, intervalMs: 60_000 } });
    await Promise.all([t.search('a'), t.search('b'), t.search('c')]);
    const [first, , third] = t.sim.log().map((entry) => entry.at);
    expect((third as number) - (first as number)).toBeGreaterThanOrEqual(4000);
  });

  it('serves series in turn, so that a long series cannot starve the others', async () => {
    await using t = await setup({}, { concurrency: 1 });
    const long = Array.from({ length: 12 }, (_, i) => t.search(`long ${i}`, 'long'));
    const short = [t.search('short 0', 'short'), t.search('short 1', 'short')];
    await Promise.all([...long, ...short]);
    const order = t.sim.log().map((entry) => new URLSearchParams(entry.query).get('q'));
    // The first long request may already be running; the short series gets every other turn after it.
    expect(order.indexOf('short 1')).toBeLessThanOrEqual(4);
  });
});

describe('429: pause, slow down, retry', () => {
  it('pauses the whole queue for Retry-After, then re-sends the request', async () => {
    await using t = await setup({}, { concurrency: 1 });
    t.sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '3' }, times: 1 });
    const outcome = await t.search('limited');
    expect(outcome).toMatchObject({ ok: true, attempts: 2 });
    const [rejected, accepted] = t.sim.log();
    expect(rejected?.status).toBe(429);
    expect(accepted?.status).toBe(200);
    expect((accepted?.at as number) - (rejected?.at as number)).toBeGreaterThanOrEqual(3000);
    const kinds = t.events.map((e) => e.type);
    expect(kinds.indexOf('pause')).toBeGreaterThan(-1);
    expect(kinds.indexOf('pause')).toBeLessThan(kinds.lastIndexOf('request'));
    expect(t.scheduler.stats()).toMatchObject({ retries: 1, rateLimited: 1, rateLimitedWaitMs: 3000 });
  });

  it('without a usable Retry-After, pauses for a jittered backoff instead', async () => {
    await using t = await setup({}, { concurrency: 1, rateLimit: { baseDelayMs: 1000 } });
    t.sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '0' }, times: 1 });
    t.sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': 'later' }, times: 1 });
    expect(await t.search('jitter')).toMatchObject({ ok: true, attempts: 3 });
    const pauses = t.events.filter((e): e is Extract<SchedulerEvent, { type: 'pause' }> => e.type === 'pause').map((e) => e.ms);
    // Full jitter with random() = 0.5: half of 1000, then half of 2000.
    expect(pauses).toEqual([500, 1000]);
  });

  it('cuts rate and concurrency on 429s, then raises them with sustained success, never above configuration', async () => {
    await using t = await setup(
      { retryAfter: 'none', keys: [{ key: TEST_KEY, name: 'main', ratePerSecond: 4, burst: 2 }] },
      { rate: { requestsPerSecond: 12 }, concurrency: 6, rateLimit: { baseDelayMs: 100 } },
    );
    expect(t.scheduler.stats().learnedLimit).toBeNull();
    const outcomes = await Promise.all(Array.from({ length: 120 }, (_, i) => t.search(`series ${i % 6}/${i}`, `s${i % 6}`)));
    expect(outcomes.every((o) => o.ok)).toBe(true);
    // What it learned is in its stats (the run's webdata_etl.rate.limit gauge): near the server's 4/s.
    expect(t.scheduler.stats().learnedLimit).toBeGreaterThan(2.5);
    expect(t.scheduler.stats().learnedLimit).toBeLessThan(6);
    const adapts = t.events.filter((e): e is Extract<SchedulerEvent, { type: 'adapt' }> => e.type === 'adapt');
    const cuts = adapts.filter((e) => e.reason === 'rate_limited');
    const raises = adapts.filter((e) => e.reason === 'sustained_success');
    expect(cuts.length).toBeGreaterThan(0);
    expect(raises.length).toBeGreaterThan(0);
    expect(cuts[0]?.rate).toBeLessThan(12);
    expect(cuts[0]?.concurrency).toBeLessThan(6);
    for (const e of adapts) {
      expect(e.rate).toBeLessThanOrEqual(12);
      expect(e.concurrency).toBeLessThanOrEqual(6);
    }
    // It learned the server's rate: after the first cuts, it settles near 4/s rather than far below.
    const last = adapts.at(-1);
    expect(last?.rate).toBeGreaterThan(2.5);
    expect(last?.rate).toBeLessThan(6);
  });

  it('at three times a limit it is not told, behind a burst: two 429s at the opening, one crossing, then none', async () => {
    await using t = await setup(
      { retryAfter: 'none', keys: [{ key: TEST_KEY, name: 'main', ratePerSecond: 10, burst: 2 }] },
      { rate: { requestsPerSecond: 30 }, concurrency: 8 },
    );
    const started = t.clock.now();
    const outcomes = await Promise.all(Array.from({ length: 300 }, (_, i) => t.search(`q ${i}`, `s${i % 8}`)));
    expect(outcomes.every((o) => o.ok)).toBe(true);
    // Before: the bisection's step back up held 1–2 s on the burst, counted as held, and the fall back just under it
    // failed too (five 429s). Every page still arrives, once.
    expect(statuses(t.sim).filter((status) => status === 429)).toHaveLength(3);
    expect(statuses(t.sim).filter((status) => status === 200)).toHaveLength(300);
    const cuts = t.events.filter((e): e is Extract<SchedulerEvent, { type: 'adapt' }> => e.type === 'adapt' && e.reason === 'rate_limited');
    expect(cuts.at(-1)?.rate).toBeLessThanOrEqual(10 / 0.99);
    // 300 pages at 10/s take 30 s; what the opening and the crossing cost is under 1.5 s of them.
    expect(t.clock.now() - started).toBeLessThan(31_500);
  });

  it('resumes after a pause even when timers fire a little before the clock reaches their end', async () => {
    // Real timers can wake up to a millisecond early against performance.now(); a queue restarted only when
    // now() >= pausedUntil stayed paused for good.
    const inner = virtualClock(1_000_000);
    const early = { now: inner.now, hold: inner.hold, sleep: (ms: number, signal?: AbortSignal) => inner.sleep(ms > 1 ? ms - 0.5 : ms, signal) };
    await using sim = await simulator({ clock: inner.now });
    await using client = clientFor(sim);
    const scheduler = createScheduler({ clock: early, random: () => 0.5, concurrency: 2 });
    sim.inject({ fault: 'status', status: 429, times: 3 });
    const outcomes = await Promise.all(
      ['a', 'b', 'c', 'd'].map((q) => scheduler.request({ series: q, path: '/searchengine/search' }, (signal) => client.search({ q }, { signal }))),
    );
    expect(outcomes.every((o) => o.ok)).toBe(true);
  });

  it('gives up on a request after its own 429 budget', async () => {
    await using t = await setup({}, { concurrency: 1, rateLimit: { retries: 2, baseDelayMs: 10 } });
    t.sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '1' } });
    const outcome = await t.search('never');
    expect(outcome).toMatchObject({ ok: false, kind: 'failed', attempts: 3 });
    expect(statuses(t.sim)).toEqual([429, 429, 429]);
  });

  it('a Retry-After longer than the maximum is a quota: the run stops and says when to resume', async () => {
    await using t = await setup({}, { concurrency: 1 });
    t.sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '7200' }, times: 1 });
    const before = Date.now();
    const [first, second] = await Promise.all([t.search('a'), t.search('b')]);
    expect(first).toMatchObject({ ok: false, kind: 'stopped', reason: 'quota' });
    expect(second).toMatchObject({ ok: false, kind: 'stopped', reason: 'quota' });
    const resumeAt = (first as Extract<Outcome<SearchResponse>, { kind: 'stopped' }>).resumeAt?.getTime() ?? 0;
    expect(resumeAt - before).toBeGreaterThanOrEqual(7_200_000);
    expect(resumeAt - before).toBeLessThan(7_300_000);
    expect(t.scheduler.stopped?.message).toContain('resume after');
    expect(t.sim.stats().requests).toBe(1);
  });

  it('a stall breaker stops the run when nothing succeeds for too long', async () => {
    await using t = await setup({}, { concurrency: 1, rateLimit: { stallAfterMs: 30_000, retries: 1000 } });
    t.sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '5' } });
    const outcome = await t.search('stuck');
    expect(outcome).toMatchObject({ ok: false, kind: 'stopped', reason: 'stall' });
    expect(t.scheduler.stopped?.message).toContain('30000 ms');
    expect(t.sim.stats().requests).toBeGreaterThanOrEqual(6);
    expect(t.sim.stats().requests).toBeLessThanOrEqual(8);
  });
});

describe('other failures', () => {
  it('5xx, resets and timeouts are retried with backoff, then the series fails with the last error', async () => {
    await using t = await setup({}, { concurrency: 1, retry: { attempts: 4, baseDelayMs: 100 } });
    t.sim.inject({ fault: 'status', status: 503, times: 1 });
    t.sim.inject({ fault: 'reset', times: 1 });
    expect(await t.search('recovers')).toMatchObject({ ok: true, attempts: 3 });
    t.sim.inject({ fault: 'status', status: 500 });
    const failed = await t.search('gives up');
    expect(failed).toMatchObject({ ok: false, kind: 'failed', attempts: 4 });
    expect((failed as { error: { status: number } }).error.status).toBe(500);
    const delays = t.events.filter((e): e is Extract<SchedulerEvent, { type: 'retry' }> => e.type === 'retry').map((e) => e.delayMs);
    // Full jitter with random() = 0.5 doubles: 50, 100 for the first request; 50, 100, 200 for the second.
    expect(delays).toEqual([50, 100, 50, 100, 200]);
  });

  it('400 and other 4xx are not retried', async () => {
    await using t = await setup({}, { concurrency: 1 });
    t.sim.inject({ fault: 'status', status: 400, body: { error: 'bad page' }, times: 1 });
    t.sim.inject({ fault: 'status', status: 404, times: 1 });
    expect(await t.search('a')).toMatchObject({ ok: false, kind: 'failed', attempts: 1 });
    expect(await t.search('b')).toMatchObject({ ok: false, kind: 'failed', attempts: 1 });
    expect(t.sim.stats().requests).toBe(2);
  });

  for (const [status, reason] of [
    [401, 'unauthorized'],
    [402, 'payment_required'],
  ] as const) {
    it(`${status} stops the run: nothing new is sent, answers in flight are kept`, async () => {
      await using t = await setup({}, { concurrency: 3 });
      // The slow answers must outlast the refusal's way back: at 50 ms, on a machine at load 32 (eight sessions' tests on
      // two cores), a slow answer freed its slot before the 402 was read, and 'later 0' went out.
      t.sim.inject({ fault: 'delay', ms: 1500, match: { q: 'slow 0' } });
      t.sim.inject({ fault: 'delay', ms: 1500, match: { q: 'slow 1' } });
      t.sim.inject({ fault: 'status', status, match: { q: 'refused' }, times: 1 });
      // Two slow requests are in flight when the refusal arrives; the rest wait behind the concurrency limit.
      const slow = [t.search('slow 0'), t.search('slow 1')];
      while (t.sim.stats().inFlight < 2) await new Promise((resolve) => setImmediate(resolve));
      const refused = t.search('refused');
      const later = Array.from({ length: 5 }, (_, i) => t.search(`later ${i}`));
      expect(await refused).toMatchObject({ ok: false, kind: 'stopped', reason });
      for (const outcome of await Promise.all(slow)) expect(outcome).toMatchObject({ ok: true });
      for (const outcome of await Promise.all(later)) expect(outcome).toMatchObject({ ok: false, kind: 'stopped', reason });
      expect(t.scheduler.stopped?.reason).toBe(reason);
      // The in-flight answers were paid for and are counted; nothing was sent after the refusal.
      expect(t.scheduler.stats().credits.spent).toBe(2);
      expect(t.sim.stats().credits.main?.debited).toBe(2);
      expect(t.sim.log().map((e) => new URLSearchParams(e.query).get('q'))).not.toContain('later 0');
    });
  }

  it('403 stops every series of that endpoint; the others go on', async () => {
    await using t = await setup({ keys: [{ key: TEST_KEY, name: 'main', endpoints: ['/searchengine/search'] }] }, { concurrency: 1 });
    const video = (q: string) =>
      t.scheduler.request({ series: `video ${q}`, path: '/video/search' }, (signal) => t.client.request({ path: '/video/search', query: { q } }, { signal }));
    const results = await Promise.all([video('a'), t.search('x'), video('b'), t.search('y'), video('c')]);
    expect(results.map((r) => (r.ok ? 'ok' : r.kind === 'stopped' ? r.reason : r.kind))).toEqual(['forbidden', 'ok', 'forbidden', 'ok', 'forbidden']);
    expect(t.sim.stats().byPath['/video/search']).toBe(1);
    expect(t.scheduler.stopped).toBeUndefined();
    expect([...t.scheduler.forbidden.keys()]).toEqual(['/video/search']);
  });

  it('stop() lets requests in flight finish and sends nothing new', async () => {
    await using t = await setup({}, { concurrency: 2 });
    t.sim.inject({ fault: 'delay', ms: 30 });
    const first = [t.search('a'), t.search('b')];
    const rest = [t.search('c'), t.search('d')];
    while (t.sim.stats().inFlight < 2) await new Promise((resolve) => setImmediate(resolve));
    t.scheduler.stop();
    expect((await Promise.all(first)).map((o) => o.ok)).toEqual([true, true]);
    expect(await Promise.all(rest)).toEqual([
      expect.objectContaining({ kind: 'stopped', reason: 'interrupted' }),
      expect.objectContaining({ kind: 'stopped', reason: 'interrupted' }),
    ]);
    expect(t.sim.stats().requests).toBe(2);
  });

  it('abort() cancels requests in flight', async () => {
    await using t = await setup({}, { concurrency: 2 });
    t.sim.inject({ fault: 'hang' });
    const pending = [t.search('a'), t.search('b')];
    while (t.sim.stats().inFlight < 2) await new Promise((resolve) => setImmediate(resolve));
    t.scheduler.abort();
    for (const outcome of await Promise.all(pending)) expect(outcome).toMatchObject({ ok: false, kind: 'stopped', reason: 'aborted' });
  });
});

describe('credit meter', () => {
  it('never exceeds the budget at 50-way concurrency, with retries and ambiguous outcomes in flight', async () => {
    await using t = await setup(
      { seed: 9, faults: { serverErrorRate: 0.15, resetRate: 0.05 }, rules: [{ fault: 'reset', charged: true, match: { q: 'q7' } }] },
      { concurrency: 50, budget: { maxCredits: 37 }, retry: { attempts: 6, baseDelayMs: 10 } },
    );
    const outcomes = await Promise.all(Array.from({ length: 120 }, (_, i) => t.search(`q${i}`)));
    const credits = t.scheduler.stats().credits;
    expect(credits.spent).toBeLessThanOrEqual(37);
    expect(credits.reserved).toBe(0);
    expect(t.sim.stats().credits.main?.debited).toBeLessThanOrEqual(37);
    expect(outcomes.filter((o) => !o.ok && o.kind === 'stopped' && o.reason === 'budget').length).toBeGreaterThan(0);
    // Every success was charged; every uncertain outcome counted.
    const ok = outcomes.filter((o) => o.ok).length;
    expect(credits.spent - credits.uncertain).toBe(ok);
    expect(credits.uncertain).toBeGreaterThan(0);
  });

  it('counts ambiguous outcomes as spent and reports them apart; releases definite failures', async () => {
    await using t = await setup(
      { weights: { '/searchengine/search': 2 } },
      { concurrency: 1, retry: { baseDelayMs: 1 }, credits: { weights: { '/searchengine/search': 2 } } },
    );
    t.sim.inject({ fault: 'reset', charged: true, times: 1 }); // charged, then the connection died: uncertain
    t.sim.inject({ fault: 'status', status: 503, times: 1 }); // definite failure: released
    t.sim.inject({ fault: 'malformed', times: 1 }); // a 2xx we could not read: uncertain
    expect(await t.search('ambiguous')).toMatchObject({ ok: true, attempts: 4 });
    const credits = t.scheduler.stats().credits;
    expect(credits).toMatchObject({ spent: 6, uncertain: 4, reserved: 0, byEndpoint: { '/searchengine/search': 6 }, bySeries: { ambiguous: 6 } });
    // The simulator charged exactly what we counted: the reset after charging, the malformed 2xx and the success.
    expect(t.sim.stats().credits.main?.debited).toBe(6);
  });

  it('a request the budget cannot take is not sent, and its outcome says budget', async () => {
    await using t = await setup({}, { concurrency: 1, budget: { maxCredits: 3 }, spentBefore: 1 });
    const outcomes = await Promise.all(['a', 'b', 'c'].map((q) => t.search(q)));
    expect(outcomes.map((o) => (o.ok ? 'ok' : o.kind === 'stopped' ? o.reason : 'failed'))).toEqual(['ok', 'ok', 'budget']);
    expect(t.sim.stats().requests).toBe(2);
    expect(t.scheduler.stats().credits).toMatchObject({ budget: 3, spent: 3, remaining: 0 });
  });

  it('a request held back only by reservations in flight waits for them: one returned lets it go', async () => {
    await using t = await setup({ rules: [{ fault: 'status', status: 400, match: { q: 'a' } }] }, { concurrency: 3, budget: { maxCredits: 2 } });
    // a and b take the budget; c waits instead of ending its series; a's 400 is not charged and returns its room.
    const outcomes = await Promise.all(['a', 'b', 'c'].map((q) => t.search(q)));
    expect(outcomes.map((o) => (o.ok ? 'ok' : o.kind === 'stopped' ? o.reason : 'failed'))).toEqual(['failed', 'ok', 'ok']);
    expect(t.sim.log().map((entry) => new URLSearchParams(entry.query).get('q'))).toEqual(['a', 'b', 'c']);
    expect(t.scheduler.budgetReached).toBe(false);
    expect(t.scheduler.affordable('/searchengine/search')).toBe(false);
    expect(t.scheduler.budgetReached).toBe(true);
    // Nothing can be returned now: the next request is refused at once.
    expect(await t.search('d')).toMatchObject({ ok: false, kind: 'stopped', reason: 'budget', attempts: 0 });
    expect(t.scheduler.stats().credits).toMatchObject({ spent: 2, reserved: 0 });
  });

  it('estimates worst-case requests and credits before anything is sent', () => {
    const units = [
      ...Array.from({ length: 6 }, () => ({ path: '/searchengine/search', maxRequests: 5 })),
      { path: '/video/search', maxRequests: 3 },
    ];
    expect(estimate(units, { weights: { '/video/search': 2 }, budget: { maxCredits: 30 } })).toEqual({
      requests: 33,
      credits: 36,
      byEndpoint: { '/searchengine/search': { series: 6, requests: 30, credits: 30 }, '/video/search': { series: 1, requests: 3, credits: 6 } },
      budget: 30,
      withinBudget: false,
    });
  });
});

describe('proactive pacing from rate-limit headers', () => {
  for (const style of ['ietf', 'ietf-legacy', 'x-ratelimit'] as const) {
    it(`slows down before a 429 (${style})`, async () => {
      await using t = await setup(
        { rateLimitHeaders: style, keys: [{ key: TEST_KEY, name: 'main', quota: { requests: 10, windowMs: 10_000 } }] },
        { concurrency: 2 },
      );
      const started = t.clock.now();
      const outcomes = await Promise.all(Array.from({ length: 25 }, (_, i) => t.search(`h${i}`)));
      expect(outcomes.every((o) => o.ok)).toBe(true);
      // Two windows had to pass; at most the first request or two of a window can beat the headers to it.
      expect(t.clock.now() - started).toBeGreaterThanOrEqual(20_000);
      expect(t.sim.stats().byStatus['429'] ?? 0).toBeLessThanOrEqual(style === 'x-ratelimit' ? 3 : 2);
    });
  }
});

describe('a fixed window, told from its headers', () => {
  it('is used whole: its count at the configured pace, then a wait for its end (not a spread over a reset rounded up)', async () => {
    await using t = await setup(
      { rateLimitHeaders: 'ietf', keys: [{ key: TEST_KEY, name: 'main', quota: { requests: 50, windowMs: 5_000 } }] },
      { rate: { requestsPerSecond: 30 }, concurrency: 8 },
    );
    const started = t.clock.now();
    const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => t.search(`w${i}`)));
    expect(outcomes.every((o) => o.ok)).toBe(true);
    // Four windows' counts: three windows waited out, then the fourth's 50 at 30/s, about 16.7 s. Spread evenly at the
    // policy's 10/s (50 per 5 s), as a bucket would be, 200 take 20 s.
    expect(t.clock.now() - started).toBeLessThan(18_000);
    expect(t.clock.now() - started).toBeGreaterThanOrEqual(15_000);
    expect(t.sim.stats().byStatus['429'] ?? 0).toBeLessThanOrEqual(1);
    expect(t.events.filter((e) => e.type === 'pause' && e.reason === 'rate_limit_headers').length).toBeGreaterThanOrEqual(3);
  });
});

describe('seams for limits shared beyond this process', () => {
  it('a credit meter and a pacer of the caller’s own take every reservation and every slot', async () => {
    const clock = virtualClock(0);
    await using sim = await simulator({ clock: clock.now });
    const client = clientFor(sim);
    const inner = createCreditMeter({ budget: { maxCredits: 3 } });
    const calls = { reserve: 0, commit: 0, acquire: 0 };
    const meter: CreditMeter = {
      ...inner,
      reserve: (weight) => (calls.reserve++, inner.reserve(weight)),
      commit: (charge) => (calls.commit++, inner.commit(charge)),
    };
    const scheduler = createScheduler({
      clock,
      meter,
      pacer: (rate, c) => {
        const own = createPacer(rate, c);
        return Object.assign(Object.create(own) as Pacer, { acquire: (signal?: AbortSignal) => (calls.acquire++, own.acquire(signal)) });
      },
    });
    const outcomes = await Promise.all(['a', 'b', 'c', 'd'].map((q) => scheduler.request({ series: q, path: '/searchengine/search' }, (signal) => client.search({ q }, { signal }))));
    await client.close();
    // The meter given holds the budget: three sent, the fourth turned away by it.
    expect(outcomes.filter((o) => o.ok)).toHaveLength(3);
    expect(outcomes.filter((o) => !o.ok && o.kind === 'stopped' && o.reason === 'budget')).toHaveLength(1);
    expect(calls).toMatchObject({ commit: 3 });
    expect(calls.reserve).toBeGreaterThanOrEqual(3);
    expect(calls.acquire).toBeGreaterThanOrEqual(3);
    expect(sim.stats().requests).toBe(3);
  });
});

describe('wall-clock time', () => {
  it('comes from the injected clock: a pause’s end and a quota’s resumeAt are virtual time, not the system’s', async () => {
    const epochAt = Date.UTC(2030, 0, 1);
    const clock = virtualClock(0, epochAt);
    await using sim = await simulator({ clock: clock.now, epoch: clock.epoch });
    const client = clientFor(sim);
    const events: SchedulerEvent[] = [];
    const scheduler = createScheduler({ clock, random: () => 0.5, concurrency: 1 });
    scheduler.on((event) => events.push(event));
    sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '3' }, times: 1 });
    sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '7200' }, times: 1 });
    const outcome = await scheduler.request({ series: 's', path: '/searchengine/search' }, (signal) => client.search({ q: 'q' }, { signal }));
    await client.close();
    const pause = events.find((event) => event.type === 'pause');
    expect(pause).toMatchObject({ until: new Date(epochAt + 3000).toISOString(), cause: '429, Retry-After 3 s' });
    expect(outcome).toMatchObject({ ok: false, kind: 'stopped', reason: 'quota' });
    // Asked 3 virtual seconds after the start: the quota ends 7200 s after that.
    expect((outcome as { resumeAt?: Date }).resumeAt?.getTime()).toBe(epochAt + 3000 + 7_200_000);
  });
});

describe('stats and events', () => {
  it('report requests by status, retries, pauses, rate, concurrency and credits', async () => {
    await using t = await setup({}, { concurrency: 3, rate: { requestsPerSecond: 10 } });
    t.sim.inject({ fault: 'status', status: 500, times: 1 });
    t.sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '1' }, times: 1 });
    await Promise.all(['a', 'b', 'c', 'd'].map((q) => t.search(q)));
    const stats = t.scheduler.stats();
    expect(stats.requests).toEqual({ total: 6, byStatus: { '200': 4, '500': 1, '429': 1 }, inFlight: 0 });
    expect(stats.retries).toBe(2);
    expect(stats.rateLimitedWaitMs).toBeGreaterThanOrEqual(1000);
    expect(stats.rate).toBeLessThanOrEqual(10);
    expect(stats.credits.spent).toBe(4);
    expect(new Set(t.events.map((e) => e.type))).toEqual(new Set(['request', 'response', 'retry', 'pause', 'adapt']));
  });

  it('validates its options, naming the field', () => {
    expect(() => createScheduler({ concurrency: 0 })).toThrow(/concurrency/);
    expect(() => createScheduler({ rate: { requestsPerSecond: -1 } })).toThrow(/rate/);
    expect(() => createScheduler({ budget: { maxCredits: -5 } } as never)).toThrow(/budget\.maxCredits/);
  });
});

