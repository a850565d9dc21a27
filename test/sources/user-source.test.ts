import { describe, expect, it } from 'vitest';
import { defineSource, type Item, normalize, paginators, type Series, toSqlite, ValidationError } from '../../src/index.ts';
import { clientFor, rejection, simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import type { Simulator } from '../../src/simulator/index.ts';

/**
 * A source written the way a user writes one (docs/pipelines.md, "Writing a source"): app reviews, one series per
 * app, following the `next_cursor` each page gives. Everything else — the scheduler, the budget, permits, stop
 * rules, exactly-once commits, resume — is the package's.
 */
const APPS = ['com.example.notes', 'com.example.maps', 'com.example.chess'];

function reviews(options: { maxPages: number; pageSize?: number }) {
  return defineSource({
    endpoint: '/appstore/reviews',
    *series(): Generator<Series> {
      for (const app of APPS) yield { id: `reviews|${app}`, endpoint: '/appstore/reviews', query: app, country: '', lang: '' };
    },
    paginator: paginators.custom((answer) => {
      const next = (answer.body as { next_cursor?: string | null }).next_cursor;
      return next ? { cursor: next } : null;
    }),
    maxPages: options.maxPages,
    pageSize: options.pageSize,
    async fetch(series, request, { client, signal }) {
      const response = await client.request<{ data: Item[] }>({ path: '/appstore/reviews', query: { app_id: series.query, ...(request.params as Record<string, string>) } }, { signal });
      return { ...response, items: response.body.data };
    },
  });
}

/** What the endpoint serves for an app, page by page, fetched by hand. */
async function served(sim: Simulator, app: string): Promise<Item[][]> {
  await using client = clientFor(sim);
  const pages: Item[][] = [];
  let cursor: string | null = null;
  do {
    const response: { body: { data: Item[]; next_cursor: string | null } } = await client.request({ path: '/appstore/reviews', query: { app_id: app, cursor: cursor ?? undefined } });
    pages.push(response.body.data);
    cursor = response.body.next_cursor;
  } while (cursor);
  return pages;
}

/** Checks that the database holds every item the endpoint serves for each app, in order, once; returns the pages. */
async function expectEverythingServed(sim: Simulator, path: string): Promise<number> {
  let pages = 0;
  for (const app of APPS) {
    const expected = await served(sim, app);
    pages += expected.length;
    expect(rowsOf(path, app)).toEqual(expected.flat());
  }
  return pages;
}

const rowsOf = (path: string, app: string) => sqliteRows(path, `SELECT * FROM results WHERE query = '${app}' ORDER BY page, position`).map((r) => JSON.parse(String(r.raw)) as Item);

describe('a source a user writes: defineSource with a paginator', () => {
  it('gets every item of every series once, each series ending where the server says there is no next page', async () => {
    await using sim = await simulator({ seed: 11 });
    using dir = workdir();
    const summary = await runOn(sim, { name: 'reviews', source: reviews({ maxPages: 50 }), stages: [normalize()], sinks: [toSqlite({ path: dir.path('r.sqlite') })] });
    expect(summary).toMatchObject({ status: 'completed', series: { total: 3, byReason: { end: 3 } } });
    const pages = await expectEverythingServed(sim, dir.path('r.sqlite'));
    expect(summary.pages.fetched).toBe(pages);
    // The cursor went out as the paginator said, and the endpoint's own weight was counted.
    expect(sim.log().some((e) => e.query.includes('cursor='))).toBe(true);
    expect(summary.credits.byEndpoint).toEqual({ '/appstore/reviews': pages });
  });

  it('a source that says its endpoint once, gives series without ids and answers with its items alone runs as one that says it all', async () => {
    await using sim = await simulator({ seed: 11 });
    using dir = workdir();
    const brief = defineSource({
      endpoint: '/appstore/reviews',
      series: () => APPS.map((app) => ({ query: app })),
      paginator: paginators.custom((answer) => {
        const next = (answer.body as { next_cursor?: string | null }).next_cursor;
        return next ? { cursor: next } : null;
      }),
      maxPages: 50,
      async fetch(series, request, { client, signal }) {
        const response = await client.request<{ data: Item[] }>({ path: '/appstore/reviews', query: { app_id: series.query, ...(request.params as Record<string, string>) } }, { signal });
        // Only what a paginator needs: the items and the body (no status, request id, time or size).
        return { items: response.body.data, body: response.body };
      },
    });
    const summary = await runOn(sim, { name: 'brief', source: brief, stages: [normalize()], sinks: [toSqlite({ path: dir.path('r.sqlite') })] });
    expect(summary).toMatchObject({ status: 'completed', series: { total: 3, byReason: { end: 3 } } });
    expect(summary.pages.fetched).toBe(await expectEverythingServed(sim, dir.path('r.sqlite')));
    // The ids the run made, one per app, from the endpoint and the query.
    expect(sqliteRows(dir.path('r.sqlite'), 'SELECT series_id FROM series ORDER BY series_id').map((row) => row.series_id)).toEqual(
      [...APPS].sort().map((app) => JSON.stringify(['/appstore/reviews', app, '', ''])),
    );
  });

  it('ends each series by the first stop rule that holds, in their order: short, then end, then max_pages', async () => {
    // Seed 5 serves the apps 5 pages (25 items each, then 16), 3 (25, 25, 14) and 3 (25, 25, 15).
    await using sim = await simulator({ seed: 5 });
    expect((await Promise.all(APPS.map((app) => served(sim, app)))).map((pages) => pages.map((page) => page.length))).toEqual([
      [25, 25, 25, 25, 16],
      [25, 25, 14],
      [25, 25, 15],
    ]);
    using dir = workdir();
    // On the last page of the 3-page apps, short, end and max_pages all hold: short is asked first.
    const withSize = await runOn(sim, { name: 'sized', source: reviews({ maxPages: 3, pageSize: 25 }), stages: [normalize()], sinks: [toSqlite({ path: dir.path('a.sqlite') })] });
    expect(withSize.series.byReason).toEqual({ short: 2, max_pages: 1 });
    // Without a page size, end and max_pages hold: end is asked first.
    const withoutSize = await runOn(sim, { name: 'unsized', source: reviews({ maxPages: 3 }), stages: [normalize()], sinks: [toSqlite({ path: dir.path('b.sqlite') })] });
    expect(withoutSize.series.byReason).toEqual({ end: 2, max_pages: 1 });
    for (const app of APPS) expect(rowsOf(dir.path('b.sqlite'), app)).toEqual((await served(sim, app)).slice(0, 3).flat());
  });

  it('resumes a series from the cursor committed with its last page: no page paid twice, none missed', async () => {
    // Seed 5: the first app has 5 pages; it is the first series to get a permit, in either invocation.
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const pipeline = { name: 'reviews', source: reviews({ maxPages: 50 }), stages: [normalize()], sinks: [toSqlite({ path: dir.path('r.sqlite') })], rate: { concurrency: 1 } };
    const stopped = await runOn(sim, { ...pipeline, budget: { maxCredits: 3 } });
    expect(stopped).toMatchObject({ status: 'budget', pages: { fetched: 3 } });
    const before = sim.log().length;
    const resumed = await runOn(sim, pipeline, { resume: true, budget: { maxCredits: 100 } });
    expect(resumed).toMatchObject({ runId: stopped.runId, status: 'completed', series: { byReason: { end: 3 } } });
    const requests = sim.log().slice(before);
    // The first request of the resumed invocation went on from a cursor: the series was not started again.
    expect(requests[0]?.query).toContain('cursor=');
    const pages = await expectEverythingServed(sim, dir.path('r.sqlite'));
    expect(resumed.pages.fetched).toBe(pages);
    expect(requests).toHaveLength(pages - 3);
  });

  it('refuses a spec it cannot run, naming the field, before anything is sent', async () => {
    const error = await rejection(Promise.resolve().then(() => defineSource({ ...reviewsSpec(), maxPages: 0 })));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toContain('source.maxPages');
    const noPaginator = await rejection(Promise.resolve().then(() => defineSource({ ...reviewsSpec(), paginator: 'cursor' as never })));
    expect(noPaginator.message).toContain('source.paginator');
  });
});

function reviewsSpec() {
  return {
    endpoint: '/appstore/reviews',
    series: () => [],
    paginator: paginators.pageNumber(),
    maxPages: 5,
    fetch: () => Promise.reject(new Error('not sent')),
  };
}
