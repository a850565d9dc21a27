import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { describe, expect, it } from 'vitest';
import type { Series } from '../../src/pipeline/page.ts';
import { pageNumber } from '../../src/sources/paginators/index.ts';
import { pageSeries } from '../../src/sources/paging.ts';
import type { SourceContext } from '../../src/sources/source.ts';

const series: Series = { id: 'search|q|us|', endpoint: '/searchengine/search', query: 'q', country: 'us', lang: '' };

describe('a series waiting for its next permit', () => {
  it("holds nothing of its last answer: the parsed body and its items are collectable once the page is handed on (was: kept in the paging loop's frame until the next request)", async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    // What each answer was made of, watched without being held.
    const bodies: WeakRef<object>[] = [];
    const itemLists: WeakRef<object>[] = [];
    let permits = 0;
    let secondAsked!: () => void;
    const waitingForSecond = new Promise<void>((resolve) => (secondAsked = resolve));
    let letSecondGo!: (release: () => void) => void;
    let lost = false;
    const ctx = {
      scheduler: {
        stats: () => ({ concurrency: 1 }),
        affordable: () => true,
        request: async (_work: unknown, send: (signal: AbortSignal, key: string) => Promise<unknown>) => ({ ok: true, value: await send(new AbortController().signal, 'main'), attempts: 1 }),
      },
      pagePermit: () => {
        permits += 1;
        if (permits === 1) return Promise.resolve(() => undefined);
        secondAsked();
        // The next request waits here, as behind the run's other pages in flight.
        return new Promise<() => void>((resolve) => (letSecondGo = resolve));
      },
      processed: async () => ({ new: 100 }),
      lost: () => lost,
    } as unknown as SourceContext;
    let pushed = 0;
    const paging = pageSeries({
      series,
      resume: undefined,
      ctx,
      push: async () => void (pushed += 1),
      paginator: pageNumber(),
      limits: { maxPages: 10, shortBelow: undefined },
      stopAfterNoNew: undefined,
      fetch: async () => {
        const items = Array.from({ length: 100 }, (_, i) => ({ url: `https://example.com/${i}`, title: `result ${i} `.repeat(20) }));
        const body = { data: items, meta: { total: 1000 } };
        bodies.push(new WeakRef(body));
        itemLists.push(new WeakRef(items));
        return { items, body, status: 200, requestId: 'r1', durationMs: 1, bytes: 20_000 };
      },
    });
    await waitingForSecond;
    expect(pushed).toBe(1);
    // Collected in a later turn (a WeakRef keeps its target through the turn it was made in).
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    gc();
    expect({ body: bodies[0]?.deref() === undefined, items: itemLists[0]?.deref() === undefined }).toEqual({ body: true, items: true });
    // The series goes on: lost to another worker, it ends without a request.
    lost = true;
    letSecondGo(() => undefined);
    await expect(paging).resolves.toEqual({ reason: 'lost', pages: 1 });
  });
});
