import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { normalize, toPostgres, toSqlite, type Source } from '../../src/index.ts';
import { StageContractError } from '../../src/errors/index.ts';
import type { Page, Series } from '../../src/pipeline/page.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

// A source of one's own (the `Source` interface, not defineSource) in a distributed run (state and sink in one
// PostgreSQL database): it must page the series the run's queue hands it (`ctx.feed`). One that ignores the feed
// used to end "completed" with the last page of every series refused as another worker's (docs/pipelines.md).

const QUERIES = ['alpha', 'beta', 'gamma'];
const PAGES = 3;
const seriesOf = (q: string): Series => ({ id: `search|${q}||`, endpoint: '/searchengine/search', query: q, country: '', lang: '' });

/** Made-up pages of every series, in order; with `fed`, only the series the feed hands out. */
function ownSource(fed: boolean): Source {
  const plan = () => ({
    endpoint: '/searchengine/search',
    seriesCount: QUERIES.length,
    maxPages: PAGES,
    fingerprint: { own: QUERIES.length },
    *series() {
      for (const q of QUERIES) yield seriesOf(q);
    },
  });
  async function* pagesOf(series: Series, ctx: Parameters<Source['pages']>[0]): AsyncGenerator<Page> {
    for (let number = 1; number <= PAGES; number += 1) {
      const last = number === PAGES;
      const items = [1, 2].map((position) => ({ title: `${series.query} ${number}.${position}`, url: `https://example.com/${series.query}/${number}/${position}` }));
      yield {
        key: `${series.id}#${number}`,
        series,
        number,
        items,
        meta: { status: 200, requestId: undefined, fetchedAt: new Date().toISOString(), latencyMs: 0, bytes: 0, served: items.length, ...(last ? { end: 'max_pages' as const } : {}) },
      };
      if (last) await ctx.seriesEnded(series, { reason: 'max_pages', pages: PAGES });
    }
  }
  return {
    plan,
    async *pages(ctx) {
      const feed = fed ? ctx.feed?.(plan().series()[Symbol.iterator]()) : undefined;
      if (!feed) {
        for (const series of plan().series()) yield* pagesOf(series, ctx);
        return;
      }
      for (let next = await feed.next(); !next.done; next = await feed.next()) yield* pagesOf(next.value, ctx);
    },
  };
}

describe('a source of its own that ignores ctx.feed', () => {
  it('is paged whole where there is no queue (state in SQLite)', async () => {
    await using sim = await simulator({ seed: 1 });
    const dir = mkdtempSync(join(tmpdir(), 'own-source-'));
    try {
      const summary = await runOn(sim, { name: 'own-sqlite', source: ownSource(false), stages: [normalize()], sinks: [toSqlite({ path: join(dir, 'out.db'), table: 'results' })], state: { path: join(dir, 'state.db') } } as never);
      expect(summary.status).toBe('completed');
      expect(sqliteRows(join(dir, 'out.db'), 'SELECT COUNT(DISTINCT query || page) AS pages, COUNT(*) AS n FROM results')).toEqual([{ pages: QUERIES.length * PAGES, n: QUERIES.length * PAGES * 2 }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describePostgres('a source of its own in a distributed run', () => {
  it('fails naming ctx.feed when it pages series the queue did not hand it, instead of ending "completed" without them', async () => {
    await using sim = await simulator({ seed: 1 });
    const db = await testDatabase();
    try {
      const outcome = await runOn(sim, { name: 'own-unfed', source: ownSource(false), stages: [normalize()], sinks: [toPostgres({ url: db.url, table: 'results' })], state: { url: db.url } } as never).then(
        (summary) => ({ summary }),
        (error: unknown) => ({ error }),
      );
      // Before: { status: 'completed' } with the last page of every series missing from the table.
      expect('error' in outcome).toBe(true);
      const error = (outcome as { error: unknown }).error;
      expect(error).toBeInstanceOf(StageContractError);
      expect((error as Error).message).toMatch(/ctx\.feed/);
    } finally {
      await db.drop();
    }
  });

  it('stores every page of every series when it takes them from ctx.feed', async () => {
    await using sim = await simulator({ seed: 1 });
    const db = await testDatabase();
    try {
      const summary = await runOn(sim, { name: 'own-fed', source: ownSource(true), stages: [normalize()], sinks: [toPostgres({ url: db.url, table: 'results' })], state: { url: db.url } } as never);
      expect(summary.status).toBe('completed');
      expect(await sql(db.url, 'SELECT COUNT(DISTINCT (query, page))::int AS pages, COUNT(*)::int AS rows FROM public.results')).toEqual([{ pages: QUERIES.length * PAGES, rows: QUERIES.length * PAGES * 2 }]);
    } finally {
      await db.drop();
    }
  });
});
