import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { normalize, searchPages, toPostgres, type RunSummary, type Source } from '../../src/index.ts';
import { WORKER_COMMIT_WINDOW_VARIABLE, workerCommitWindow } from '../../src/distributed/postgres-host.ts';
import { UsageError } from '../../src/errors/usage-error.ts';
import type { Series } from '../../src/pipeline/page.ts';
import { madeUpPage } from '../fixtures/made-up-source.ts';
import { simulator } from '../helpers.ts';
import { runOn } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

// A worker of a distributed run (state and sink in one PostgreSQL database: a one-worker run) with more than one page
// committing at once. Before the fix, its first pages, handed over before the journal's number was read, each read it
// and committed in whatever order the reads answered; a page committed before the one before it in its series was
// then refused by the fence as though another worker had the series, and so were the pages handed over after it
// (each read the number again). The series went back to the queue and was fetched again (pages paid twice), and a
// source that ignores `ctx.lost` left its series' jobs held for ever: the run never ended (issue 43, item 5).

const WINDOW = '8';
/** A run that does not end within this is taken for hung: the test fails instead of hanging the suite. */
const BOUND_MS = 30_000;

/** The run's summary, or a failure once `BOUND_MS` passed (the run is then aborted). */
async function bounded(start: (signal: AbortSignal) => Promise<RunSummary>): Promise<RunSummary> {
  const abort = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abort.abort();
      reject(new Error(`the run did not end within ${BOUND_MS / 1000} s`));
    }, BOUND_MS);
  });
  const running = start(abort.signal);
  try {
    return await Promise.race([running, hung]);
  } finally {
    clearTimeout(timer);
    // An aborted run still lets go of what it holds before the database is dropped.
    await running.catch(() => undefined);
  }
}

const seriesOf = (q: string): Series => ({ id: `search|${q}||`, endpoint: '/searchengine/search', query: q, country: '', lang: '' });

/** Made-up pages (no request) of the series the run's queue hands out, as bench (g)'s replay pages them. */
function fedPages(queries: readonly string[], pages: number): Source {
  const plan = () => ({
    endpoint: '/searchengine/search',
    seriesCount: queries.length,
    maxPages: pages,
    fingerprint: { fed: queries.length },
    *series() {
      for (const q of queries) yield seriesOf(q);
    },
  });
  return {
    plan,
    async *pages(ctx) {
      const feed = ctx.feed?.(plan().series()[Symbol.iterator]());
      if (!feed) throw new Error('expected a distributed run');
      for (let next = await feed.next(); !next.done; next = await feed.next()) {
        const series = next.value;
        for (let number = 1; number <= pages; number += 1) {
          const last = number === pages;
          const items = [1, 2, 3].map((position) => ({ title: `${series.query} ${number}.${position}`, url: `https://example.com/${series.query}/${number}/${position}` }));
          yield madeUpPage(series, number, items, last);
          if (last) await ctx.seriesEnded(series, { reason: 'max_pages', pages });
        }
      }
    },
  };
}

describe('a worker\'s commit window', () => {
  it('is 8 unless WEBDATA_WORKER_COMMIT_WINDOW says otherwise, and a bad value is refused naming the variable', () => {
    expect(workerCommitWindow({})).toBe(8);
    expect(workerCommitWindow({ [WORKER_COMMIT_WINDOW_VARIABLE]: '1' })).toBe(1);
    for (const bad of ['0', '2.5', 'many', '65']) {
      expect(() => workerCommitWindow({ [WORKER_COMMIT_WINDOW_VARIABLE]: bad })).toThrow(UsageError);
      expect(() => workerCommitWindow({ [WORKER_COMMIT_WINDOW_VARIABLE]: bad })).toThrow(/WEBDATA_WORKER_COMMIT_WINDOW must be a whole number of pages from 1 to 64/);
    }
  });
});

describePostgres('a worker with a commit window above 1', () => {
  beforeEach(() => {
    process.env[WORKER_COMMIT_WINDOW_VARIABLE] = WINDOW;
  });
  afterEach(() => {
    delete process.env[WORKER_COMMIT_WINDOW_VARIABLE];
  });

  it('a bad WEBDATA_WORKER_COMMIT_WINDOW stops the run before it plans: no request, no worker registered', async () => {
    process.env[WORKER_COMMIT_WINDOW_VARIABLE] = 'many';
    await using sim = await simulator({ seed: 43 });
    const db = await testDatabase();
    try {
      const failure = await runOn(sim, { name: 'window-bad', source: searchPages({ queries: ['a', 'b'], maxPages: 2, count: 10 }), stages: [normalize()], sinks: [toPostgres({ url: db.url, table: 'results' })], state: { url: db.url } } as never).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(UsageError);
      expect((failure as Error).message).toMatch(/WEBDATA_WORKER_COMMIT_WINDOW must be a whole number of pages from 1 to 64, not "many"/);
      expect(sim.stats().credits.main?.debited ?? 0).toBe(0);
      expect(await sql(db.url, `SELECT COUNT(*)::int AS n FROM webdata.workers`)).toEqual([{ n: 0 }]);
    } finally {
      await db.drop();
    }
  });

  it('commits every page once, in order: nothing lost, no page paid twice', async () => {
    await using sim = await simulator({ seed: 43, latencyMs: { min: 0, max: 0 } });
    const db = await testDatabase();
    try {
      const queries = Array.from({ length: 16 }, (_, i) => `window ${i}`);
      const summary = await bounded((signal) =>
        runOn(
          sim,
          { name: 'window-search', source: searchPages({ queries, maxPages: 4, count: 10 }), stages: [normalize()], sinks: [toPostgres({ url: db.url, table: 'results' })], state: { url: db.url }, rate: { concurrency: 16 } } as never,
          { signal },
        ),
      );
      expect(summary.status).toBe('completed');
      // Every series ended where the simulator's answers end it (some run short of 4 pages), each page committed once.
      const [series] = await sql(db.url, `SELECT COUNT(*)::int AS n, COUNT(*) FILTER (WHERE status = 'ended' AND reason IN ('max_pages', 'short'))::int AS ended, SUM(pages)::int AS pages, SUM(items_written)::int AS written FROM webdata.series`);
      expect(series).toMatchObject({ n: 16, ended: 16 });
      expect(summary.pages.fetched).toBe(series?.pages);
      // Before: series refused at their own commits went back to the queue and were fetched again.
      expect(sim.stats().credits.main?.debited).toBe(series?.pages);
      expect(await sql(db.url, `SELECT COUNT(DISTINCT (query, page))::int AS pages, COUNT(*)::int AS rows FROM public.results`)).toEqual([{ pages: series?.pages, rows: series?.written }]);
    } finally {
      await db.drop();
    }
  });

  it('ends the run with a source that pages the series it is fed page after page (bench (g)), every page written once', async () => {
    await using sim = await simulator({ seed: 43 });
    const db = await testDatabase();
    try {
      const queries = Array.from({ length: 12 }, (_, i) => `fed ${i}`);
      // Before: hung (a series refused at its own pages' commits, its job held for ever), here failed at the bound.
      const summary = await bounded((signal) =>
        runOn(sim, { name: 'window-fed', source: fedPages(queries, 5), stages: [normalize()], sinks: [toPostgres({ url: db.url, table: 'results' })], state: { url: db.url } } as never, { signal }),
      );
      expect(summary.status).toBe('completed');
      expect(await sql(db.url, `SELECT COUNT(DISTINCT (query, page))::int AS pages, COUNT(*)::int AS rows FROM public.results`)).toEqual([{ pages: 60, rows: 180 }]);
      expect(await sql(db.url, `SELECT status, pages, COUNT(*)::int AS n FROM webdata.series GROUP BY 1, 2`)).toEqual([{ status: 'ended', pages: 5, n: 12 }]);
    } finally {
      await db.drop();
    }
  });
});
