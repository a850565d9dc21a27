// A pool of keys in one scheduler (src/schedule/key-pool.ts): each key its own limit, learned from its own answers; a
// request to the key free soonest; a refused key retired, the others finishing the work. Over real sockets, against the
// simulator's keys, in virtual time.
import { describe, expect, it } from 'vitest';
import { type Client, createClient } from '../../src/client/index.ts';
import { createScheduler, type Outcome, type Scheduler, type SchedulerEvent, type SchedulerOptions, virtualClock } from '../../src/schedule/index.ts';
import type { RateStart } from '../../src/schedule/options.ts';
import { type SimulatedKey, startSimulator } from '../../src/simulator/index.ts';
import type { FleetKey, FleetKeys, Retirement } from '../../src/schedule/fleet-key.ts';

const KEYS = { a: 'sk_pool_a_0123456789', b: 'sk_pool_b_0123456789', c: 'sk_pool_c_0123456789' } as const;
type Label = keyof typeof KEYS;

/** The simulator with the given keys' plans, a client per key, and a scheduler over a pool of them, in one virtual time. */
async function pool(plans: Partial<Record<Label, Omit<SimulatedKey, 'key' | 'name'>>>, options: SchedulerOptions, headers: 'none' | 'ietf' = 'none') {
  const clock = virtualClock(1_000_000);
  const labels = Object.keys(plans) as Label[];
  const sim = await startSimulator({ clock: clock.now, retryAfter: 'none', rateLimitHeaders: headers, keys: labels.map((label) => ({ key: KEYS[label], name: label, ...plans[label] })) });
  const clients = new Map<string, Client>(labels.map((label) => [label, createClient({ baseUrl: sim.url, apiKey: KEYS[label], timeoutMs: 2000 })]));
  const events: SchedulerEvent[] = [];
  const scheduler = createScheduler({ clock, random: () => 0.5, keys: labels.map((label) => ({ label })), ...options });
  scheduler.on((event) => events.push(event));
  const search = (q: string, by: Scheduler = scheduler): Promise<Outcome<unknown>> =>
    by.request({ series: q, path: '/searchengine/search' }, (signal, key) => (clients.get(key) as Client).search({ q }, { signal }));
  /** Another scheduler over the same keys (a later run), its keys started as `starts` says. */
  const another = (starts: Partial<Record<Label, RateStart>>) => createScheduler({ clock, random: () => 0.5, ...options, keys: labels.map((label) => ({ label, ...(starts[label] ? { start: starts[label] } : {}) })) });
  /** Accepted answers, by the key that got them, and 429s and 401s by key (the simulator's log). */
  const byKey = (status: number) => Object.fromEntries(labels.map((label) => [label, sim.log().filter((entry) => entry.key === label && entry.status === status).length]));
  return {
    clock,
    sim,
    scheduler,
    events,
    search,
    another,
    byKey,
    async [Symbol.asyncDispose]() {
      for (const client of clients.values()) await client.close();
      await sim.close();
    },
  };
}

describe('a pool of keys', () => {
  it('three keys whose limits the run is not told (8, 4 and 2 a second): each sent to near its own, the pool near their sum', async () => {
    await using t = await pool(
      { a: { ratePerSecond: 8, burst: 2 }, b: { ratePerSecond: 4, burst: 2 }, c: { ratePerSecond: 2, burst: 2 } },
      { rate: { requestsPerSecond: 24 }, concurrency: 4 },
    );
    const started = t.clock.now();
    const outcomes = await Promise.all(Array.from({ length: 420 }, (_, i) => t.search(`q${i}`)));
    const seconds = (t.clock.now() - started) / 1000;
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    const accepted = t.byKey(200);
    // Each key near its own share of the 14 a second: the work goes where the room is.
    expect((accepted.a as number) / 420).toBeGreaterThan(0.5);
    expect((accepted.b as number) / 420).toBeGreaterThan(0.22);
    expect((accepted.c as number) / 420).toBeGreaterThan(0.1);
    // The pool near the sum of the limits (420 at 14/s is 30 s), paying for the discovery of three unknown limits.
    expect(420 / seconds / 14).toBeGreaterThan(0.85);
    const refused = t.byKey(429);
    expect(Object.values(refused).reduce((sum, n) => sum + n, 0) / 420).toBeLessThan(0.06);
    // Each key learned its own limit: a 429 of the slowest never slowed the fastest.
    const stats = t.scheduler.stats().keys;
    expect(stats.map((key) => key.label)).toEqual(['a', 'b', 'c']);
    const rate = (label: string) => stats.find((key) => key.label === label)?.rate as number;
    expect(rate('a')).toBeGreaterThan(6.5);
    expect(rate('b')).toBeLessThan(5);
    expect(rate('c')).toBeLessThan(2.6);
    expect(stats.reduce((sum, key) => sum + key.requests, 0)).toBe(t.scheduler.stats().requests.total);
    // Events say which key they are of: a pause or a cut names its key.
    expect(t.events.filter((event) => event.type === 'adapt').every((event) => 'key' in event && typeof event.key === 'string')).toBe(true);
  });

  it('the same over 360 pages, key by key: each back near its own limit within seconds of its last cut, the pool at 0.95 of the sum', async () => {
    await using t = await pool(
      { a: { ratePerSecond: 8, burst: 2 }, b: { ratePerSecond: 4, burst: 2 }, c: { ratePerSecond: 2, burst: 2 } },
      { rate: { requestsPerSecond: 24 }, concurrency: 4 },
    );
    const started = t.clock.now();
    // Each key's rate as it changed: when (seconds into the run), and to what.
    const timeline: Record<string, { at: number; rate: number }[]> = { a: [], b: [], c: [] };
    t.scheduler.on((event) => {
      if (event.type === 'adapt' && 'key' in event && typeof event.key === 'string') timeline[event.key]?.push({ at: (t.clock.now() - started) / 1000, rate: event.rate });
    });
    const outcomes = await Promise.all(Array.from({ length: 360 }, (_, i) => t.search(`q${i}`)));
    const seconds = (t.clock.now() - started) / 1000;
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    // Past the opening (5 s), a key is never set far under its limit: a failed raise steps down near it. Before: the
    // 2/s key fell to 1.2/s (its floor, what the burst could not hide of a rate held a second) and crept back at
    // 0.04/s a step, 15 s apart; in the nginx runs the 4/s key stayed at 2.54/s.
    const limits = { a: 8, b: 4, c: 2 } as const;
    for (const [label, limit] of Object.entries(limits)) {
      for (const change of timeline[label]?.filter((each) => each.at > 5) ?? []) expect(change.rate, `${label} at ${change.at} s`).toBeGreaterThanOrEqual(limit * 0.9);
    }
    // Before: 0.90 of the summed 14/s (the 2/s key at 0.66 of its own).
    expect(360 / seconds / 14).toBeGreaterThanOrEqual(0.95);
    expect((t.byKey(200).c as number) / seconds / 2).toBeGreaterThan(0.9);
  });

  it('the first run at three limits the run is not told: each key’s slow start crosses its limit once, 429s at 2 % of the requests or under', async () => {
    await using t = await pool(
      { a: { ratePerSecond: 8, burst: 2 }, b: { ratePerSecond: 4, burst: 2 }, c: { ratePerSecond: 2, burst: 2 } },
      { rate: { requestsPerSecond: 24 }, concurrency: 4 },
    );
    const started = t.clock.now();
    const outcomes = await Promise.all(Array.from({ length: 360 }, (_, i) => t.search(`q${i}`)));
    const seconds = (t.clock.now() - started) / 1000;
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    // Before (each key started at 24/s and halved down to its limit, its bucket full at each half): 13 429s (3.5 %),
    // 3, 4 and 6 a key; the halvings alone 2, 3 and 4.
    const refused = t.byKey(429);
    const all = Object.values(refused).reduce((sum, n) => sum + n, 0);
    expect(all / t.sim.log().length).toBeLessThanOrEqual(0.02);
    for (const label of ['a', 'b', 'c'] as const) expect(refused[label], label).toBeLessThanOrEqual(3);
    // The climb from 3/s costs a second or two of each key's limit: still 0.95 of the sum over the run.
    expect(360 / seconds / 14).toBeGreaterThanOrEqual(0.95);
  });

  it('keys whose server tells its limits (RateLimit headers) have no slow start: from the first answer, at the configured rate', async () => {
    // A policy of 10/s a key (a window of 100 s, 1000 requests), the pipeline at 10/s a key: 40 requests in 2 s. A slow
    // start (2/s, then 4 and 8, doubling each second or two) would take 4 s or more.
    await using t = await pool({ a: { quota: { requests: 1000, windowMs: 100_000 } }, b: { quota: { requests: 1000, windowMs: 100_000 } } }, { rate: { requestsPerSecond: 10 }, concurrency: 4 }, 'ietf');
    const started = t.clock.now();
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, i) => t.search(`q${i}`)));
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    expect(t.clock.now() - started).toBeLessThan(2600);
    expect(t.byKey(429)).toEqual({ a: 0, b: 0 });
  });

  it('the same 360 pages again, each key started at what the first run knew of it: no 429, at 0.96 of the sum or more', async () => {
    await using t = await pool(
      { a: { ratePerSecond: 8, burst: 2 }, b: { ratePerSecond: 4, burst: 2 }, c: { ratePerSecond: 2, burst: 2 } },
      { rate: { requestsPerSecond: 24 }, concurrency: 4 },
    );
    await Promise.all(Array.from({ length: 360 }, (_, i) => t.search(`first${i}`)));
    const known = Object.fromEntries(t.scheduler.stats().keys.map((key) => [key.label, key.known]));
    const starts: Partial<Record<Label, RateStart>> = {};
    for (const [label, limit] of Object.entries({ a: 8, b: 4, c: 2 })) {
      const rate = known[label]?.rate as number;
      // What a 429 and the requests accepted after it prove, or what held: never over the limit, and near it. The 2/s
      // key's slow start pays 2 429s where the halvings paid 6, and a proof is what was accepted after a 429, sent at
      // the key's rate, not over it: 1.88 proven (0.94) where the halvings' 429s proved more than 1.9.
      expect(rate, label).toBeLessThanOrEqual(limit);
      expect(rate, label).toBeGreaterThan(limit * (label === 'c' ? 0.93 : 0.95));
      starts[label as Label] = { rate, above: known[label]?.above, trusted: true };
    }
    // A quiet minute: the buckets are full again, as for a run tomorrow.
    await t.clock.sleep(60_000);
    const before = t.sim.log().length;
    const again = t.another(starts);
    const started = t.clock.now();
    const outcomes = await Promise.all(Array.from({ length: 360 }, (_, i) => t.search(`again${i}`, again)));
    const seconds = (t.clock.now() - started) / 1000;
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    expect(t.sim.log().slice(before).filter((entry) => entry.status === 429)).toHaveLength(0);
    // Before: 0.930 (at 0.906 to 0.93 of the sum, with the slowest key's last requests queued 2 s out after the others were done).
    expect(360 / seconds / 14).toBeGreaterThanOrEqual(0.96);
  });

  it('a key revoked mid-run is retired at its first 401, the others finish the work, and the run goes on', async () => {
    await using t = await pool({ a: { ratePerSecond: 10, burst: 2 }, b: { ratePerSecond: 10, burst: 2 } }, { rate: { requestsPerSecond: 10 }, concurrency: 3 });
    const first = await Promise.all(Array.from({ length: 40 }, (_, i) => t.search(`before${i}`)));
    expect(first.every((outcome) => outcome.ok)).toBe(true);
    t.sim.updateKey('b', { status: 'revoked' });
    const after = await Promise.all(Array.from({ length: 60 }, (_, i) => t.search(`after${i}`)));
    expect(after.every((outcome) => outcome.ok)).toBe(true);
    // Only requests already given the key before its first 401 came back: at most its concurrency.
    expect(t.byKey(401).b).toBeGreaterThanOrEqual(1);
    expect(t.byKey(401).b).toBeLessThanOrEqual(3);
    const retired = t.events.filter((event) => event.type === 'key_retired');
    expect(retired).toEqual([expect.objectContaining({ type: 'key_retired', key: 'b', reason: 'unauthorized' })]);
    expect(t.scheduler.stopped).toBeUndefined();
    const stats = t.scheduler.stats().keys;
    expect(stats.find((key) => key.label === 'b')?.retired).toEqual(expect.objectContaining({ reason: 'unauthorized' }));
    expect(stats.find((key) => key.label === 'a')?.retired).toBeNull();
  });

  it('every key refused: the run stops as with one key (unauthorized), after each key’s first 401s', async () => {
    await using t = await pool({ a: { status: 'revoked' }, b: { status: 'revoked' } }, { rate: { requestsPerSecond: 10 }, concurrency: 2 });
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => t.search(`q${i}`)));
    expect(t.scheduler.stopped?.reason).toBe('unauthorized');
    expect(outcomes.every((outcome) => !outcome.ok && outcome.kind === 'stopped' && outcome.reason === 'unauthorized')).toBe(true);
    expect((t.byKey(401).a as number) + (t.byKey(401).b as number)).toBeLessThanOrEqual(4);
    expect(t.events.filter((event) => event.type === 'key_retired').map((event) => 'key' in event && event.key).sort()).toEqual(['a', 'b']);
  });

  it('a key’s share of the credits (maxCredits): it takes no more, the others take the rest, and the run’s budget caps them all', async () => {
    await using t = await pool({ a: {}, b: {} }, { keys: [{ label: 'a', maxCredits: 7 }, { label: 'b' }], budget: { maxCredits: 30 }, concurrency: 4 });
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, i) => t.search(`q${i}`)));
    expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(30);
    expect(outcomes.filter((outcome) => !outcome.ok && outcome.kind === 'stopped' && outcome.reason === 'budget')).toHaveLength(10);
    expect(t.byKey(200)).toEqual({ a: 7, b: 23 });
    expect(t.scheduler.stats().keys.map((key) => [key.label, key.credits])).toEqual([
      ['a', 7],
      ['b', 23],
    ]);
  });

  it('one key is the run as before pools: its events say no key, and its stats one entry, "default"', async () => {
    await using t = await pool({ a: { ratePerSecond: 5, burst: 1 } }, { keys: [{ label: 'default' }], rate: { requestsPerSecond: 20 }, concurrency: 2 });
    await Promise.all(Array.from({ length: 20 }, (_, i) => t.search(`q${i}`)));
    expect(t.events.some((event) => 'key' in event)).toBe(false);
    expect(t.scheduler.stats().keys.map((key) => key.label)).toEqual(['default']);
  });
});

// What other processes of a distributed run share of each key (the scheduler's `fleet` seam, src/schedule/fleet-key.ts),
// told here by a fleet of the test's own: their retirements, and each key's share as they all reserve it.
describe("a pool's keys as other processes share them", () => {
  type Heard = ReturnType<FleetKey['heard']>;
  const fleet = (told: Partial<Record<Label, Heard[number][]>>, shares: Partial<Record<Label, number>> = {}) => {
    const retired: { key: string; retirement: Retirement }[] = [];
    const keys: FleetKeys = (key) => ({
      reserve: () => {
        const left = shares[key as Label];
        if (left === undefined) return true;
        shares[key as Label] = left - 1;
        return Promise.resolve(left > 0);
      },
      settle: () => undefined,
      retire: (retirement) => void retired.push({ key, retirement }),
      heard: () => told[key as Label] ?? [],
    });
    return { keys, retired, told };
  };

  it('a key another process retired gets no request here; the last keys retired there stop the run as their answer would here', async () => {
    const shared = fleet({ b: [{ reason: 'unauthorized', message: 'HTTP 401: the key was refused' }] });
    await using run = await pool({ a: {}, b: {} }, { concurrency: 2, fleet: shared.keys });
    const first = await Promise.all(['one', 'two', 'three', 'four'].map((q) => run.search(q)));
    expect(first.every((outcome) => outcome.ok)).toBe(true);
    expect(run.byKey(200)).toEqual({ a: 4, b: 0 });
    expect(run.events.filter((event) => event.type === 'key_retired')).toMatchObject([{ key: 'b', reason: 'unauthorized', message: 'another worker: HTTP 401: the key was refused' }]);
    // Heard here, not met here: not told back.
    expect(shared.retired).toEqual([]);
    // Later, a is retired there for the endpoint: the latest retirement decides how the run stops, as in one process.
    await run.clock.sleep(1000);
    shared.told.a = [{ reason: 'payment_required', message: 'HTTP 402: no credits left', path: '/searchengine/search' }];
    const last = await run.search('five');
    expect(last).toMatchObject({ ok: false, kind: 'stopped', reason: 'payment_required' });
    expect(run.scheduler.stopped).toMatchObject({ reason: 'payment_required', message: 'HTTP 402: no credits left' });
    expect(run.sim.stats().requests).toBe(4);
  });

  it("a key's share as all the processes reserve it: once it refuses, the key's requests go to the others; a key retired here is told to them", async () => {
    const shared = fleet({}, { b: 1 });
    await using run = await pool({ a: {}, b: {}, c: { status: 'revoked' } }, { concurrency: 1, keys: [{ label: 'a' }, { label: 'b', maxCredits: 100 }, { label: 'c' }], fleet: shared.keys });
    const outcomes = await Promise.all(['one', 'two', 'three', 'four', 'five'].map((q) => run.search(q)));
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    expect(run.byKey(200)).toMatchObject({ a: 4, b: 1 });
    expect(run.byKey(401).c).toBe(1);
    expect(shared.retired).toMatchObject([{ key: 'c', retirement: { reason: 'unauthorized' } }]);
  });
});
