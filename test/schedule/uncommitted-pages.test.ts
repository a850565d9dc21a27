import { describe, expect, it } from 'vitest';
import { normalize, searchPages, type Stage, toCsv } from '../../src/index.ts';
import { simulator, until } from '../helpers.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

describe('pages paid for and not yet committed', () => {
  it('are never more than the concurrency, however slow the stages: what a kill could make a resume pay again', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    let unblock = () => {};
    const blocked = new Promise<void>((resolve) => (unblock = resolve));
    const slow: Stage = async function* (pages) {
      for await (const page of pages) {
        await blocked;
        yield page;
      }
    };
    const running = runOn(sim, {
      name: 'permits',
      source: searchPages({ queries: ['a', 'b', 'c', 'd', 'e', 'f'], countries: ['us'], maxPages: 3 }),
      stages: [normalize(), slow],
      sinks: [toCsv({ path: dir.path('p.csv') })],
      rate: { concurrency: 3 },
    });
    // The server answers at once: without the bound, the fetchers would fill every buffer on the way to the stuck
    // stage (and then some) long before this wait is over; with it, three requests and no more.
    await until(() => sim.stats().requests >= 3);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sim.stats().requests).toBe(3);
    unblock();
    const summary = await running;
    expect(summary).toMatchObject({ status: 'completed', pages: { fetched: 18 } });
    expect(sim.stats().requests).toBe(18);
  });
});
