// A retired key in the scheduler's stats (src/schedule/key-pool.ts, figures()): when it was retired, in wall-clock
// time, and for which endpoint — what the summary, `runs`, the report and the metrics say of it. Over real sockets,
// against the simulator's keys, in virtual time with a wall clock of its own.
import { describe, expect, it } from 'vitest';
import { type Client, createClient } from '../../src/client/index.ts';
import { createScheduler, type SchedulerEvent, virtualClock } from '../../src/schedule/index.ts';
import { startSimulator } from '../../src/simulator/index.ts';

const KEYS = { a: 'sk_retired_a_0123456789', b: 'sk_retired_b_0123456789' } as const;
const EPOCH = Date.UTC(2030, 0, 1);
const PATH = '/searchengine/search';

async function twoKeys(b: 'revoked' | 'suspended') {
  const clock = virtualClock(0, EPOCH);
  const sim = await startSimulator({ clock: clock.now, epoch: clock.epoch, retryAfter: 'none', keys: [{ key: KEYS.a, name: 'a' }, { key: KEYS.b, name: 'b' }] });
  const clients = new Map<string, Client>(Object.entries(KEYS).map(([label, key]) => [label, createClient({ baseUrl: sim.url, apiKey: key, timeoutMs: 2000 })]));
  const scheduler = createScheduler({ clock, random: () => 0.5, keys: [{ label: 'a' }, { label: 'b' }], rate: { requestsPerSecond: 4 }, concurrency: 2 });
  const events: SchedulerEvent[] = [];
  scheduler.on((event) => events.push(event));
  const search = (q: string) => scheduler.request({ series: q, path: PATH }, (signal, key) => (clients.get(key) as Client).search({ q }, { signal }));
  return {
    clock,
    sim,
    scheduler,
    events,
    search,
    revoke: () => sim.updateKey('b', { status: b }),
    async [Symbol.asyncDispose]() {
      for (const client of clients.values()) await client.close();
      await sim.close();
    },
  };
}

describe('a retired key in the stats', () => {
  it('a 401: retired for the run, at the time of its retirement (not of the stats), path null', async () => {
    await using t = await twoKeys('revoked');
    expect((await Promise.all(Array.from({ length: 8 }, (_, i) => t.search(`before${i}`)))).every((outcome) => outcome.ok)).toBe(true);
    t.revoke();
    expect((await Promise.all(Array.from({ length: 12 }, (_, i) => t.search(`after${i}`)))).every((outcome) => outcome.ok)).toBe(true);
    const event = t.events.find((each) => each.type === 'key_retired');
    expect(event).toMatchObject({ key: 'b', reason: 'unauthorized' });
    // The work after it took virtual seconds: the stats say when it was retired, not when they were read.
    expect(t.clock.epoch?.()).toBeGreaterThan(Date.parse((event as { at: string }).at) + 1000);
    const b = t.scheduler.stats().keys.find((key) => key.label === 'b');
    expect(b?.retired).toEqual({ reason: 'unauthorized', message: expect.any(String), path: null, at: (event as { at: string }).at });
    expect(Date.parse(b?.retired?.at as string)).toBeGreaterThan(EPOCH);
  });

  it('a 403: retired for its endpoint, which the stats name', async () => {
    await using t = await twoKeys('suspended');
    t.revoke();
    expect((await Promise.all(Array.from({ length: 10 }, (_, i) => t.search(`q${i}`)))).every((outcome) => outcome.ok)).toBe(true);
    const event = t.events.find((each) => each.type === 'key_retired');
    expect(event).toMatchObject({ key: 'b', reason: 'forbidden', path: PATH });
    const stats = t.scheduler.stats().keys;
    expect(stats.find((key) => key.label === 'b')?.retired).toEqual({ reason: 'forbidden', message: expect.any(String), path: PATH, at: (event as { at: string }).at });
    expect(stats.find((key) => key.label === 'a')?.retired).toBeNull();
  });
});
