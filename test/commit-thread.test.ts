import { describe, expect, it } from 'vitest';
import { dedupe, definePipeline, normalize, type Page, run, type Source, type Stage, toCsv, toSqlite } from '../src/index.ts';
import type { Series } from '../src/pipeline/page.ts';
import { csvRows, sqliteRows, workdir } from './pipeline-helpers.ts';

/** Pages made up in memory, each ready at once (no network: what is measured is the order of stages and commits). */
function madeUp(seriesCount: number, pages: number, url: (series: number, page: number, index: number) => string): Source {
  const seriesOf = (i: number): Series => ({ id: `search|q${i}||`, endpoint: '/searchengine/search', query: `q${i}`, country: '', lang: '' });
  return {
    plan: () => ({
      endpoint: '/searchengine/search',
      seriesCount,
      maxPages: pages,
      fingerprint: { seriesCount, pages },
      *series() {
        for (let i = 0; i < seriesCount; i++) yield seriesOf(i);
      },
    }),
    async *pages(ctx) {
      for (let i = 0; i < seriesCount; i++) {
        const series = seriesOf(i);
        for (let number = 1; number <= pages; number++) {
          const items = Array.from({ length: 10 }, (_, k) => ({ title: `t${k}`, url: url(i, number, k) }));
          const last = number === pages;
          const page: Page = {
            key: `${series.id}#${number}`,
            series,
            number,
            items,
            meta: { status: 200, requestId: undefined, fetchedAt: '2026-11-23T00:00:00.000Z', latencyMs: 0, bytes: 0, served: items.length, ...(last ? { end: 'max_pages' as const } : {}) },
          };
          yield page;
        }
        ctx.seriesEnded(series, { reason: 'max_pages', pages });
      }
    },
  };
}

const offline = { baseUrl: 'http://127.0.0.1:9/api/v1', apiKey: 'unused', env: {} };

describe('page transactions on a thread of their own (SQLite)', () => {
  it('the next page goes through the stages while the one before it commits; every page commits once, in order', async () => {
    using dir = workdir();
    let committed = 0;
    // For each page the stages took: how many pages were committed by then.
    const committedWhenStaged: number[] = [];
    const watch: Stage<Record<string, unknown>, Record<string, unknown>> = async function* (pages) {
      for await (const page of pages) {
        committedWhenStaged.push(committed);
        yield page;
      }
    };
    const path = dir.path('out.sqlite');
    const summary = await run(
      definePipeline({ name: 'overlap', source: madeUp(4, 10, (s, p, k) => `https://example.com/${s}/${p}/${k}`), stages: [normalize(), watch], sinks: [toSqlite({ path })] }),
      { ...offline, onEvent: (event) => void (event.type === 'page' && (committed += 1)) },
    );
    expect(summary.status).toBe('completed');
    // Before: every page went into the stages only once the one before it had committed (committed === its index).
    expect(committedWhenStaged.some((n, index) => n < index)).toBe(true);
    expect(sqliteRows(path, 'SELECT COUNT(*) AS n, COUNT(DISTINCT url) AS urls FROM results')).toEqual([{ n: 400, urls: 400 }]);
    // The journal's numbers, one per page, in the order the pages came: the sink holds the last.
    expect(sqliteRows(path, 'SELECT seq FROM sink_checkpoints')).toEqual([{ seq: 40 }]);
    expect(sqliteRows(path, "SELECT CAST(value AS INTEGER) AS seq FROM webdata_meta WHERE key = 'seq'")).toEqual([{ seq: 40 }]);
  });

  it('dedupe across series sees the keys of pages still committing (none is written twice)', async () => {
    using dir = workdir();
    // Every series serves the same 10 URLs: only the first page of all may keep them.
    const same = (_s: number, _p: number, k: number) => `https://example.com/same/${k}`;
    const path = dir.path('out.sqlite');
    await run(definePipeline({ name: 'wide', source: madeUp(12, 1, same), stages: [normalize(), dedupe({ scope: 'global' })], sinks: [toSqlite({ path })] }), offline);
    expect(sqliteRows(path, 'SELECT COUNT(*) AS n FROM results')).toEqual([{ n: 10 }]);
    expect(sqliteRows(path, 'SELECT COUNT(*) AS n, SUM(first) AS firsts FROM sightings')).toEqual([{ n: 120, firsts: 10 }]);
  });

  it('a CSV file with its state in SQLite, and a SQLite sink in the state file, hold every page once', async () => {
    using dir = workdir();
    const path = dir.path('out.sqlite');
    await run(
      definePipeline({ name: 'both', source: madeUp(3, 6, (s, p, k) => `https://example.com/${s}/${p}/${k}`), stages: [normalize()], sinks: [toSqlite({ path }), toCsv({ path: dir.path('out.csv') })] }),
      offline,
    );
    expect(sqliteRows(path, 'SELECT COUNT(*) AS n FROM results')).toEqual([{ n: 180 }]);
    expect(csvRows(dir.path('out.csv'))).toHaveLength(180);
    expect(sqliteRows(path, 'SELECT sink_id, seq FROM sink_checkpoints ORDER BY sink_id').map((row) => row.seq)).toEqual([18, 18]);
  });
});
