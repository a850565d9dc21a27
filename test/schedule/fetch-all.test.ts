import { describe, expect, it } from 'vitest';
import { normalize, searchPages, type Stage, toSqlite } from '../../src/index.ts';
import type { Series } from '../../src/pipeline/page.ts';
import { fetchAll } from '../../src/sources/paging.ts';
import type { SourceContext } from '../../src/sources/source.ts';
import { simulator } from '../helpers.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

const series = (id: string): Series => ({ id, endpoint: '/searchengine/search', query: id, country: '', lang: '' });

/** What fetchAll reads of its context: the concurrency, the budget, progress and ends. */
function context(overrides: Partial<SourceContext>): SourceContext {
  return {
    scheduler: { stats: () => ({ concurrency: 2 }), affordable: () => true },
    progress: async () => undefined,
    seriesEnded: async () => undefined,
    ...overrides,
  } as unknown as SourceContext;
}

describe('fetchAll', () => {
  it('a series that fails outside its requests fails the stream (it ended quietly, and the run as if done)', async () => {
    const ctx = context({ progress: async (one) => (one.id === 'b' ? Promise.reject(new Error('progress of b unreadable')) : undefined) });
    const pages = fetchAll([series('a'), series('b'), series('c')].values(), ctx, async () => ({ reason: 'empty', pages: 0 }));
    await expect(
      (async () => {
        for await (const _ of pages) void _;
      })(),
    ).rejects.toThrow('progress of b unreadable');
  });

  it('an end that cannot be recorded fails the stream too', async () => {
    const ctx = context({ seriesEnded: async () => Promise.reject(new Error('disk full')) });
    const pages = fetchAll([series('a')].values(), ctx, async () => ({ reason: 'empty', pages: 0 }));
    await expect(
      (async () => {
        for await (const _ of pages) void _;
      })(),
    ).rejects.toThrow('disk full');
  });
});

describe('answered pages waiting for the stages', () => {
  it('are held to a few when the stages are slower than the network: a series asks for its next page only then (was: up to the concurrency, parsed in memory)', async () => {
    await using sim = await simulator({ latencyMs: 0, resultsPerQuery: 50 });
    using dir = workdir();
    let answered = 0;
    let staged = 0;
    const waiting: number[] = [];
    const slow: Stage<Record<string, unknown>, Record<string, unknown>> = async function* (pages) {
      for await (const page of pages) {
        staged += 1;
        waiting.push(answered - staged);
        // Slower than a zero-latency server: answers would pile up.
        await new Promise((resolve) => setTimeout(resolve, 3));
        yield page;
      }
    };
    const queries = Array.from({ length: 40 }, (_, i) => `q${i}`);
    await runOn(
      sim,
      { name: 'backlog', source: searchPages({ queries, maxPages: 5, count: 10 }), stages: [normalize(), slow], sinks: [toSqlite({ path: dir.path('out.sqlite') })], rate: { concurrency: 32 } },
      { onEvent: (event) => void (event.type === 'response' && event.status === 200 && (answered += 1)) },
    );
    expect(staged).toBe(200);
    // The first answers of all the requests in flight wait once; then the backlog stays near its bound (8).
    expect(Math.max(...waiting.slice(64))).toBeLessThanOrEqual(12);
  });
});
