import pg from 'pg';
import { expect, it } from 'vitest';
import { seriesStates } from '../../src/pipeline/context.ts';
import type { Page, Series } from '../../src/pipeline/page.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { createCommitter } from '../../src/run/commit.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

// A worker's committer with several pages handed over at once (a commit window above 1), behind the fence. A page the
// fence refuses (another worker has its series) is dropped; the pages handed over after it must still commit, in the
// order they came. Before the fix, the refusal made the committer forget the journal's number: each page handed over
// next read it again, and committed in whatever order the reads answered, so a page committed before the one
// before it in its series was refused too, as another worker's, and so on (issue 43, item 5).

const RUN = 'run-1';
const seriesOf = (q: string): Series => ({ id: `search|${q}||`, endpoint: '/searchengine/search', query: q, country: '', lang: '' });

function page(series: Series, number: number): Page<unknown> {
  return { key: `${series.id}#${number}`, series, number, items: [], meta: { status: 200, requestId: undefined, fetchedAt: '2026-11-27T00:00:00.000Z', latencyMs: 0, bytes: 0, served: 0 } } as Page<unknown>;
}

describePostgres('a worker committing several pages at once behind the fence', () => {
  it('a page refused as another worker\'s leaves the pages handed over after it in order: each commits, none is refused', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 10 });
    try {
      const shared = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      const store = shared.fenced({ workerId: 'w1', finish: async () => true, committed: () => undefined });
      await store.startRun({ runId: RUN, pipeline: 'p', startedAt: '2026-11-27T00:00:00.000Z', fingerprint: 'f', plan: {}, budget: null });
      const committer = createCommitter({ store, runId: RUN, sinks: [], states: seriesStates(), keepJournal: false });
      await committer.start();
      const [taken, mine] = [seriesOf('taken'), seriesOf('mine')];
      // Another worker has paged `taken` to its third page: this worker's first page of it is refused at its commit.
      await sql(db.url, `INSERT INTO webdata.series (run_id, series_id, endpoint, query, country, lang, status, next_page, pages) VALUES ($1, $2, '/searchengine/search', 'taken', '', '', 'active', 3, 2)`, [RUN, taken.id]);
      const first = await Promise.all([committer.commit(page(taken, 1)), committer.commit(page(mine, 1))]);
      expect(first.map((result) => result.lost === true)).toEqual([true, false]);
      // The pages after the refusal, handed over together as a window lets them.
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => committer.commit(page(mine, i + 2))));
      expect(results.filter((result) => result.lost)).toEqual([]);
      expect(await sql(db.url, `SELECT series_id, next_page, pages FROM webdata.series WHERE run_id = $1 ORDER BY series_id`, [RUN])).toEqual([
        { series_id: mine.id, next_page: 14, pages: 13 },
        { series_id: taken.id, next_page: 3, pages: 2 },
      ]);
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
