import { describe, expect, it } from 'vitest';
import { dedupe, definePipeline, normalize, type NormalizedItem, run, type Stage, toCsv, toSqlite } from '../../src/index.ts';
import { madeUpSource, offline } from '../fixtures/made-up-source.ts';
import { commitThread } from '../../src/state/sqlite/commit-thread.ts';
import { rejection } from '../helpers.ts';
import { csvRows, sqliteRows, workdir } from '../pipeline-helpers.ts';

/** `series` series of `pages` pages of 10 items. */
const madeUp = (series: number, pages: number, url: (series: number, page: number, index: number) => string) => madeUpSource({ series, pages, perPage: 10, url });

describe('page transactions on a thread of their own (SQLite)', () => {
  it('the next page goes through the stages while the one before it commits; every page commits once, in order', async () => {
    using dir = workdir();
    let committed = 0;
    // For each page the stages took: how many pages were committed by then.
    const committedWhenStaged: number[] = [];
    const watch: Stage<NormalizedItem> = async function* (pages) {
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

describe('the commit thread itself', () => {
  it('a page larger than its heap fails the commit as the run’s own heap limit does (HeapLimitError, WEBDATA_HEAP_MB), and later pages with it', async () => {
    using dir = workdir();
    const before = process.env.WEBDATA_HEAP_MB;
    process.env.WEBDATA_HEAP_MB = '128';
    const thread = commitThread(dir.path('state.sqlite'));
    try {
      const page = (seq: number, values: unknown[]): Parameters<typeof thread.commit> => [
        {
          runId: 'r',
          seq,
          series: { seriesId: 's', endpoint: '/searchengine/search', query: 'q', country: '', lang: '' },
          progress: { status: 'active', reason: null, nextPage: seq + 1, served: 1, written: 1, duplicates: 0, digest: 'd', noNew: 0, cursor: null, state: { kind: 'changes', json: null } },
          spend: [],
          journal: null,
          checkpoints: [],
          rows: [{ kind: 'sqlite', sinkId: 'sqlite:x#t', insert: { into: 'INSERT INTO t (v)', width: 1, then: '' }, values }],
          dedupe: null,
        },
      ];
      // 48 values of 4 MB: about 200 MB once the thread has them, past its 128 MB.
      const huge = Array.from({ length: 48 }, (_, i) => `${i}`.padEnd(4 * 1024 * 1024, 'x'));
      const error = await rejection(thread.commit(...page(1, huge)));
      expect(error.name).toBe('HeapLimitError');
      expect(error.message).toMatch(/used up its heap \(128 MB\).*set WEBDATA_HEAP_MB higher/);
      // Nothing commits after a page that did not: the next fails the same way.
      expect((await rejection(thread.commit(...page(2, [])))).name).toBe('HeapLimitError');
    } finally {
      if (before === undefined) delete process.env.WEBDATA_HEAP_MB;
      else process.env.WEBDATA_HEAP_MB = before;
      await thread.close();
    }
  });
});
