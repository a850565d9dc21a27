import { expect, it } from 'vitest';
import { createScheduler, virtualClock } from '../../src/schedule/index.ts';
import { clientFor, simulator, TEST_KEY } from '../helpers.ts';

// The run's leader learns the rate for every worker (`learns`): from a longer span of answers than one process
// (the others' come late), but it must still learn the server's limit from what the server accepts, not only
// bisect towards it. It once asked for a span as long as the window the span is measured in, and never learned one.
it("a learner that shares its pacer (a distributed run's leader) learns the server's limit from what it accepts", async () => {
  const clock = virtualClock(1_000_000);
  const sim = await simulator({ clock: clock.now, retryAfter: 'none', keys: [{ key: TEST_KEY, name: 'main', ratePerSecond: 4, burst: 2 }] });
  const client = clientFor(sim, { timeoutMs: 2000 });
  try {
    const scheduler = createScheduler({ clock, random: () => 0.5, rate: { requestsPerSecond: 12 }, concurrency: 6, rateLimit: { baseDelayMs: 100 }, learns: () => true });
    const outcomes = await Promise.all(
      Array.from({ length: 120 }, (_, i) => scheduler.request({ series: `s${i % 6}`, path: '/searchengine/search' }, (signal) => client.search({ q: `series ${i % 6}/${i}`, page: 1 }, { signal }))),
    );
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(scheduler.stats().learnedLimit).toBeGreaterThan(2.5);
    expect(scheduler.stats().learnedLimit).toBeLessThan(6);
  } finally {
    await client.close();
    await sim.close();
  }
});
