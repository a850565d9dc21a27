import { expect, it } from 'vitest';
import { createPacer, createScheduler, type Pacer, virtualClock } from '../../src/schedule/index.ts';
import { clientFor, simulator, TEST_KEY } from '../helpers.ts';

// A distributed run's rate is learned by one worker at a time, the leader, and kept in a shared row that every worker's
// pacer reads back (src/distributed/shared-pacer.ts). When the leader leaves, another worker takes leadership over:
// it must go on from the rate the row holds, not from its own start, which learned nothing while it followed.
it("a worker that becomes the run's leader goes on from the rate the shared row holds, not from its configured rate", async () => {
  const clock = virtualClock(1_000_000);
  const sim = await simulator({ clock: clock.now, retryAfter: 'none', keys: [{ key: TEST_KEY, name: 'main', ratePerSecond: 4, burst: 2 }] });
  const client = clientFor(sim, { timeoutMs: 2000 });
  // The run's row, as the last leader left it: 4/s learned (paced 1 % under). Only the leader's setRate reaches it.
  let leads = false;
  const row = { rate: 3.96 };
  const written: number[] = [];
  const rowPacer = (_rate: number, pacerClock: Parameters<typeof createPacer>[1]): Pacer => {
    const inner = createPacer(row.rate, pacerClock);
    return {
      get rate() {
        return row.rate;
      },
      setRate(rate: number) {
        if (!leads) return;
        row.rate = rate;
        written.push(rate);
        inner.setRate(rate);
      },
      pauseUntil: (at: number) => inner.pauseUntil(at),
      get pausedUntil() {
        return inner.pausedUntil;
      },
      acquire: (signal?: AbortSignal) => inner.acquire(signal),
    };
  };
  try {
    const scheduler = createScheduler({ clock, random: () => 0.5, rate: { requestsPerSecond: 12 }, concurrency: 4, rateLimit: { baseDelayMs: 100 }, pacer: rowPacer, learns: () => leads });
    const search = (i: number) => scheduler.request({ series: `s${i % 4}`, path: '/searchengine/search' }, (signal) => client.search({ q: `series ${i % 4}/${i}`, page: 1 }, { signal }));
    // A follower for a few requests, then the leader left and this worker took its place.
    expect((await Promise.all(Array.from({ length: 8 }, (_, i) => search(i)))).every((o) => o.ok)).toBe(true);
    leads = true;
    expect((await Promise.all(Array.from({ length: 40 }, (_, i) => search(8 + i)))).every((o) => o.ok)).toBe(true);
    // Before: its first answer as the leader wrote its own 12/s (paced 11.88) to the row, and the limit's 429s followed.
    expect(Math.max(row.rate, ...written)).toBeLessThan(4.5);
    expect(sim.stats().byStatus['429'] ?? 0).toBe(0);
  } finally {
    await client.close();
    await sim.close();
  }
});
