// A key's rate controller started where an earlier run left it (docs/scheduler.md#a-remembered-start): the second run
// against a limit the run is not told pays no discovery. Over real sockets, against the simulator, in virtual time.
import { describe, expect, it } from 'vitest';
import { type Client, createClient } from '../../src/client/index.ts';
import { createScheduler, type SchedulerOptions, virtualClock } from '../../src/schedule/index.ts';
import { startSimulator } from '../../src/simulator/index.ts';

const KEY = 'sk_remembered_0123456789';

/** The simulator with one key at `limit` a second (burst 2), unknown to the runs, and runs of `pages` requests in one virtual time. */
async function bench(limit: number) {
  const clock = virtualClock(1_000_000);
  const sim = await startSimulator({ clock: clock.now, retryAfter: 'none', keys: [{ key: KEY, name: 'k', ratePerSecond: limit, burst: 2 }] });
  const client: Client = createClient({ baseUrl: sim.url, apiKey: KEY, timeoutMs: 2000 });
  let runs = 0;
  /** One run of `pages` requests: its 429s, its pace (accepted a second), and what it knew of the limit at its end. */
  const run = async (pages: number, options: SchedulerOptions) => {
    const before = sim.log().length;
    // A quiet minute between runs: the server's bucket is full again, as it would be for a run tomorrow.
    await clock.sleep(60_000);
    runs += 1;
    const scheduler = createScheduler({ clock, random: () => 0.5, rate: { requestsPerSecond: 24 }, concurrency: 4, ...options });
    const started = clock.now();
    const outcomes = await Promise.all(Array.from({ length: pages }, (_, i) => scheduler.request({ series: `r${runs}q${i}`, path: '/searchengine/search' }, (signal) => client.search({ q: `r${runs}q${i}` }, { signal }))));
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    const log = sim.log().slice(before);
    return { rateLimited: log.filter((entry) => entry.status === 429).length, pace: pages / ((clock.now() - started) / 1000), key: scheduler.stats().keys[0] };
  };
  return {
    run,
    async [Symbol.asyncDispose]() {
      await client.close();
      await sim.close();
    },
  };
}

describe('a remembered start', () => {
  it('a second run started at what the first learned pays no discovery: at most one 429, at 0.95 of the limit', async () => {
    await using t = await bench(8);
    const first = await t.run(160, {});
    expect(first.rateLimited).toBeGreaterThan(0);
    const known = first.key?.known;
    expect(known).toEqual(expect.objectContaining({ measured: true }));
    expect(known?.rate).toBeGreaterThan(6.5);
    expect(known?.rate).toBeLessThanOrEqual(8);
    const second = await t.run(160, { keys: [{ label: 'default', start: { rate: known?.rate as number, above: known?.above, trusted: true } }] });
    expect(second.rateLimited).toBeLessThanOrEqual(1);
    expect(second.pace / 8).toBeGreaterThan(0.95);
    // What it knows at its end is as near the limit: the next run starts as well.
    expect(second.key?.known?.rate).toBeGreaterThan(6.5);
    expect(second.key?.known?.rate).toBeLessThanOrEqual(8.2);
  });

  it('a trusted start at the limit, in a run shorter than the first probe, learns nothing new (measured false): the memory stays as it was', async () => {
    await using t = await bench(8);
    const run = await t.run(80, { keys: [{ label: 'default', start: { rate: 7.7, trusted: true } }] });
    expect(run.rateLimited).toBe(0);
    expect(run.key?.known).toEqual({ rate: 7.7, above: expect.closeTo(7.7 * 1.05, 5), measured: false });
  });

  it('a start not trusted (old) begins at it too, and probes past it within seconds', async () => {
    await using t = await bench(8);
    const second = await t.run(160, { keys: [{ label: 'default', start: { rate: 7.5, above: null, trusted: false } }] });
    expect(second.rateLimited).toBeLessThanOrEqual(3);
    // It measured the limit again: what it knows is worth keeping as new.
    expect(second.key?.known).toEqual(expect.objectContaining({ measured: true }));
    expect(second.key?.known?.rate).toBeGreaterThan(6.5);
  });

  it('never above the configured rate: a remembered rate over it starts at the configured one and is left alone', async () => {
    await using t = await bench(8);
    const run = await t.run(40, { rate: { requestsPerSecond: 4 }, keys: [{ label: 'default', start: { rate: 7.8, above: 8.2, trusted: true } }] });
    expect(run.rateLimited).toBe(0);
    expect(run.pace).toBeLessThan(4.2);
    expect(run.key?.known).toBeNull();
  });

  it('a remembered rate under the configured one starts there, at the first request (not the configured rate)', async () => {
    await using t = await bench(3);
    const run = await t.run(30, { keys: [{ label: 'default', start: { rate: 2.9, above: 3.1, trusted: true } }] });
    expect(run.rateLimited).toBe(0);
    // Without the start it would open at 24 a second into a limit of 3: 429s at once.
    expect(run.pace).toBeGreaterThan(2.6);
  });
});
