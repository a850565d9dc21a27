import { describe, expect, it } from 'vitest';
import type { Series } from '../src/pipeline/page.ts';
import { fetchAll } from '../src/sources/paging.ts';
import type { SourceContext } from '../src/sources/source.ts';

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
