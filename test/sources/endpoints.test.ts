import { describe, expect, it } from 'vitest';
import { dedupe, endpointPages, type Item, normalize, pipelineFromConfig, toSqlite } from '../../src/index.ts';
import { virtualClock } from '../../src/schedule/index.ts';
import { clientFor, simulator, TEST_KEY } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

describe('endpointPages: other catalog endpoints', () => {
  it('follows a cursor until the server says there is no next page, one series per parameter set', async () => {
    await using sim = await simulator({ seed: 6 });
    using dir = workdir();
    const params = [
      { app_id: 'com.example.a', store: 'ios' },
      { app_id: 'com.example.a', store: 'android' },
    ];
    const summary = await runOn(sim, {
      name: 'reviews',
      source: endpointPages({ path: '/appstore/reviews', params, cursor: { from: 'next_cursor', param: 'cursor' }, maxPages: 50 }),
      stages: [normalize(), dedupe()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      credits: { weights: { '/appstore/reviews': 1 } },
    });
    expect(summary).toMatchObject({ status: 'completed', series: { total: 2, byReason: { end: 2 } } });

    // Everything the endpoint serves, fetched independently by following the cursor by hand.
    await using client = clientFor(sim);
    for (const p of params) {
      const served: Item[] = [];
      let cursor: string | null | undefined;
      do {
        const { body } = await client.request<{ data: Item[]; next_cursor: string | null }>({ path: '/appstore/reviews', query: { ...p, cursor: cursor ?? undefined } });
        served.push(...body.data);
        cursor = body.next_cursor;
      } while (cursor);
      const rows = sqliteRows(dir.path('r.sqlite'), `SELECT * FROM results WHERE query = '${p.app_id} store=${p.store}' ORDER BY page, position`);
      expect(rows.map((r) => JSON.parse(String(r.raw)))).toEqual(served);
      expect(rows.every((r) => String(r.dedupe_key).startsWith('id:'))).toBe(true);
    }
    // The cursor went out as a query parameter, and the endpoint's own weight was counted.
    expect(sim.log().some((e) => e.query.includes('cursor='))).toBe(true);
    expect(summary.credits.byEndpoint).toEqual({ '/appstore/reviews': summary.pages.fetched });
  });

  it('pages by number, with a page size for the short-page rule, and its own weight', async () => {
    await using sim = await simulator({ weights: { '/video/search': 2 } });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'videos',
      source: endpointPages({ path: '/video/search', params: [{ q: 'espresso' }, { q: 'latte art' }], pageSize: 20, maxPages: 10 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('v.sqlite') })],
      credits: { weights: { '/video/search': 2 } },
    });
    // The simulator serves 30–60 videos per query at 20 a page: the last page is short.
    expect(summary.series.byReason).toEqual({ short: 2 });
    expect(summary.credits.spent).toBe(summary.pages.fetched * 2);
    expect(sim.stats().credits.main?.debited).toBe(summary.credits.spent);
    const pages = sim.log().map((e) => new URLSearchParams(e.query).get('page'));
    expect(pages.filter((p) => p === '1')).toHaveLength(2);
  });

  it('sends the page in a JSON body (POST) when the endpoint takes one', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'products',
      source: endpointPages({ path: '/products/search', body: { query: 'kettle', marketplace: 'gb' }, maxPages: 2 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('p.sqlite') })],
    });
    expect(summary.pages.fetched).toBe(2);
    expect(sim.log().map((e) => e.method)).toEqual(['POST', 'POST']);
    const rows = sqliteRows(dir.path('p.sqlite'), 'SELECT query, country, page, url FROM results ORDER BY page, position');
    expect(rows[0]).toMatchObject({ query: 'kettle', country: 'gb', page: 1 });
    expect(new Set(rows.map((r) => r.page))).toEqual(new Set([1, 2]));
  });

  it('maps items with the endpoint’s own normalization, and keeps them whole in raw', async () => {
    await using sim = await simulator({ untitledRate: 0 });
    using dir = workdir();
    await runOn(sim, {
      name: 'mapped',
      source: endpointPages({
        path: '/video/search',
        params: { q: 'tea' },
        maxPages: 1,
        mapItem: (item) => ({ ...(item as Record<string, unknown>), title: `${(item as { title: string }).title} (${(item as { channel: { name: string } }).channel.name})` }),
      }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('m.sqlite') })],
    });
    const [row] = sqliteRows(dir.path('m.sqlite'));
    expect(String(row?.title)).toMatch(/\(Channel \d\)$/);
    expect(JSON.parse(String(row?.raw))).toHaveProperty('videoId');
  });

  it('a body without an array where the items should be is a malformed answer: retried, counted as uncertain, then the series fails', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'wrong-path',
      source: endpointPages({ path: '/video/search', params: { q: 'x' }, itemsAt: 'results.items' }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('w.sqlite') })],
      retry: { attempts: 2, baseDelayMs: 1 },
    });
    expect(summary).toMatchObject({ status: 'failed_series', series: { failedBy: { malformed_response: 1 } }, credits: { spent: 2, uncertain: 2 } });
  });

  it('resumes a cursor-paged series from the cursor it committed', async () => {
    await using sim = await simulator({ seed: 8 });
    using dir = workdir();
    const pipeline = () => ({
      name: 'resume-cursor',
      source: endpointPages({ path: '/appstore/reviews', params: { app_id: 'com.example.long', store: 'ios' }, cursor: { from: 'next_cursor', param: 'cursor' }, maxPages: 50 }),
      stages: [normalize(), dedupe()],
      sinks: [toSqlite({ path: dir.path('c.sqlite') })],
      rate: { concurrency: 1 },
    });
    const stop = new AbortController();
    const first = await runOn(sim, pipeline(), { signal: stop.signal, onEvent: (e) => e.type === 'page' && e.number === 2 && stop.abort() });
    expect(first.status).toBe('interrupted');
    const before = sim.stats().requests;
    const second = await runOn(sim, pipeline());
    expect(second).toMatchObject({ status: 'completed', runId: first.runId });
    // Nothing fetched twice: every request of the resumed invocation carried a cursor it had committed.
    const resumed = sim.log().slice(before);
    expect(resumed.every((e) => e.query.includes('cursor='))).toBe(true);
    const rows = sqliteRows(dir.path('c.sqlite'), 'SELECT page FROM results');
    expect(rows.length).toBe(second.items.written);
    expect(second.pages.fetched).toBe(sim.stats().byStatus['200']);
  });

  it('JSON configs take an endpoint in place of search (or beside it); at least one source', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const definition = pipelineFromConfig({
      name: 'json-endpoint',
      endpoint: { path: '/appstore/reviews', params: [{ app_id: 'com.example.j', store: 'android' }], cursor: { from: 'next_cursor', param: 'cursor' }, maxPages: 3 },
      sinks: [{ type: 'sqlite', path: dir.path('j.sqlite') }],
    });
    const summary = await runOn(sim, definition);
    expect(summary.pages.fetched).toBe(3);
    expect(() => pipelineFromConfig({ name: 'none', sinks: [{ type: 'csv', path: 'x.csv' }] })).toThrow(/search: give a source/);
    expect(() => pipelineFromConfig({ name: 'bad', endpoint: { path: 'no-slash' }, sinks: [{ type: 'csv', path: 'x.csv' }] })).toThrow(/endpoint\.path: must be an endpoint path/);
  });

  it('paces to the rate-limit headers of its answers before the server has to answer 429, as the search source does', async () => {
    const clock = virtualClock(0);
    await using sim = await simulator({ clock: clock.now, rateLimitHeaders: 'ietf', keys: [{ key: TEST_KEY, name: 'main', quota: { requests: 2, windowMs: 10_000 } }] });
    using dir = workdir();
    const summary = await runOn(
      sim,
      {
        name: 'reviews-paced',
        source: endpointPages({ path: '/appstore/reviews', params: [{ app_id: 'com.example.a', store: 'ios' }], cursor: { from: 'next_cursor', param: 'cursor' }, maxPages: 12 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('r.sqlite') })],
        rate: { concurrency: 1 },
      },
      { clock },
    );
    expect(summary.status).toBe('completed');
    // More pages than one window allows: the run had to wait for the quota's windows.
    expect(summary.pages.fetched).toBeGreaterThan(2);
    // Without the headers the scheduler learns the quota only from its 429s (one per window at least).
    expect(sim.stats().byStatus['429'] ?? 0).toBe(0);
  });
});
