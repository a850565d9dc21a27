import { describe, expect, it } from 'vitest';
import { dedupe, normalize, searchPages, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

describe('stop rules per series', () => {
  it('empty: without count, a series runs until an empty page', async () => {
    await using sim = await simulator({ resultsPerQuery: 25 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'empty',
      source: searchPages({ queries: ['q'], maxPages: 10, count: null }),
      sinks: [toSqlite({ path: dir.path('e.sqlite') })],
      stages: [normalize()],
    });
    // 10 per page by the server's default: 10, 10, 5, then empty.
    expect(summary.series.byReason).toEqual({ empty: 1 });
    expect(summary.pages.fetched).toBe(4);
    expect(sqliteRows(dir.path('e.sqlite'), 'SELECT reason, pages FROM series')).toEqual([{ reason: 'empty', pages: 4 }]);
  });

  it('short: a page shorter than count ends the series, saving the empty request', async () => {
    await using sim = await simulator({ resultsPerQuery: 25 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'short',
      source: searchPages({ queries: ['q'], maxPages: 10, count: 10 }),
      sinks: [toSqlite({ path: dir.path('s.sqlite') })],
      stages: [normalize()],
    });
    expect(summary.series.byReason).toEqual({ short: 1 });
    expect(summary.pages.fetched).toBe(3);
    expect(sim.stats().requests).toBe(3);
  });

  it('the short-page rule can be switched off', async () => {
    await using sim = await simulator({ resultsPerQuery: 25 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'short-off',
      source: searchPages({ queries: ['q'], maxPages: 10, count: 10, stopOnShortPage: false }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('s.sqlite') })],
    });
    expect(summary.series.byReason).toEqual({ empty: 1 });
    expect(summary.pages.fetched).toBe(4);
  });

  it('max_pages: always bounded, never overshot', async () => {
    await using sim = await simulator({ resultsPerQuery: 95 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'max',
      source: searchPages({ queries: ['a', 'b'], countries: ['us', 'gb', 'de'], maxPages: 2 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('m.sqlite') })],
    });
    expect(summary.series.byReason).toEqual({ max_pages: 6 });
    expect(sim.stats().requests).toBe(12);
    const defaulted = searchPages({ queries: ['a'] }).plan();
    expect(defaulted.maxPages).toBe(5);
  });

  it('repeat: a page that repeats the previous one ends the series', async () => {
    await using sim = await simulator({ resultsPerQuery: 25, pastEnd: 'repeat-last' });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'repeat',
      source: searchPages({ queries: ['q'], maxPages: 10, count: 10, stopOnShortPage: false }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
    });
    expect(summary.series.byReason).toEqual({ repeat: 1 });
    expect(summary.pages.fetched).toBe(4);
  });

  it('no_new: K pages in a row with nothing new after dedupe', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const page = (urls: string[]) => ({ data: urls.map((url) => ({ title: url, url })) });
    sim.inject({ fault: 'status', status: 200, body: page(['https://a.example/1', 'https://a.example/2']), match: { page: 1 } });
    sim.inject({ fault: 'status', status: 200, body: page(['https://a.example/2?utm_source=x', 'https://a.example/1']), match: { page: 2 } });
    sim.inject({ fault: 'status', status: 200, body: page(['https://a.example/1#again', 'https://a.example/2']), match: { page: 3 } });
    sim.inject({ fault: 'status', status: 200, body: page(['https://a.example/3']), match: { page: 4 } });
    const summary = await runOn(sim, {
      name: 'no-new',
      source: searchPages({ queries: ['q'], maxPages: 10, count: 2, stopAfterNoNew: 2 }),
      stages: [normalize(), dedupe()],
      sinks: [toSqlite({ path: dir.path('n.sqlite') })],
    });
    expect(summary.series.byReason).toEqual({ no_new: 1 });
    expect(summary.pages.fetched).toBe(3);
  });

  it('budget: the run stops spending at its cap, and says so', async () => {
    await using sim = await simulator({ resultsPerQuery: 95 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'budget',
      source: searchPages({ queries: ['a', 'b'], countries: ['us', 'gb'], maxPages: 3 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('b.sqlite') })],
      budget: { maxCredits: 5 },
      rate: { concurrency: 3 },
    });
    expect(summary.status).toBe('budget');
    expect(summary.credits).toMatchObject({ spent: 5, budget: 5 });
    expect(sim.stats().credits.main?.debited).toBe(5);
    expect(summary.series.stopped.budget).toBeGreaterThan(0);
    expect(new Set(sqliteRows(dir.path('b.sqlite')).map((r) => `${r.query}|${r.country}|${r.page}`)).size).toBe(5);
  });
});
