import pg from 'pg';
import { expect, it } from 'vitest';
import { normalize, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import type { NormalizedItem } from '../../src/stages/normalized-item.ts';
import type { Stage } from '../../src/pipeline/compose.ts';
import { seriesStates } from '../../src/pipeline/context.ts';
import type { Page, Series } from '../../src/pipeline/page.ts';
import { openPool } from '../../src/postgres/pools.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { createCommitter } from '../../src/run/commit.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { cutProxy, lockWaiters, until } from '../postgres/cut-proxy.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

// A write sent on a connection of the pool whose answer is lost when the connection is cut (issue 43): the server's
// session may still be running it — waiting for a lock, it lands once it has it — while the writer asks whether it
// landed and sends it again. The pipelined connection's session was ended first since h43-copy; these hold the pool's
// writes to the same: a page statement of a store's own (one process's PostgreSQL state), and a PostgreSQL sink's page
// in a statement of its own (its table outside the state store).

const RUN = 'run-1';
const x: Series = { id: 'search|x||', endpoint: '/searchengine/search', query: 'x', country: '', lang: '' };
const page = (number: number): Page<unknown> =>
  ({ key: `${x.id}#${number}`, series: x, number, items: [], meta: { status: 200, requestId: undefined, fetchedAt: '2026-11-28T00:00:00.000Z', latencyMs: 0, bytes: 0, served: 0 } }) as Page<unknown>;

/**
 * Holds `lock` in another session while `write` starts and waits for it on the server; then cuts the writer's
 * connections (their answers muted first, so that the writer hears nothing) and lets go once the write was sent again.
 */
async function cutWhileWaiting<T>(url: string, through: Awaited<ReturnType<typeof cutProxy>>, lock: string, write: () => Promise<T>): Promise<T> {
  const waiting = () => lockWaiters((text) => sql(url, text));
  const other = new pg.Client({ connectionString: url });
  await other.connect();
  try {
    await other.query('BEGIN');
    await other.query(lock);
    through.mute();
    const writing = write();
    await until(async () => (await waiting()).length === 1, 'the write waiting for the lock');
    const [cut] = await waiting();
    through.cut();
    await until(async () => (await waiting()).some((pid) => pid !== cut), 'the write sent again, waiting for the lock');
    await other.query('COMMIT');
    return await writing;
  } finally {
    await other.end();
  }
}

describePostgres("a write on the pool whose answer was lost with its connection while the server still ran it", () => {
  it("a page of one process's PostgreSQL state lands once, and the run goes on: the session ends before the page is asked after or sent again", async () => {
    const db = await testDatabase();
    await using through = await cutProxy(db.url);
    const target = postgresTarget(through.url);
    const pool = openPool(target, 4);
    try {
      const store = await postgresStateStore(pool, target, { schema: 'webdata', pipeline: 'p' });
      await store.startRun({ runId: RUN, pipeline: 'p', startedAt: '2026-11-28T00:00:00.000Z', fingerprint: 'f', plan: {}, budget: null });
      const committer = createCommitter({ store, runId: RUN, sinks: [], states: seriesStates(), keepJournal: true });
      await committer.start();
      await committer.commit(page(1));
      const result = await cutWhileWaiting(db.url, through, `SELECT 1 FROM webdata.series WHERE run_id = '${RUN}' FOR UPDATE`, () => committer.commit(page(2)));
      await committer.close();
      // Before: the cut session's statement landed once the lock was let go, and the page sent again found the journal
      // past it: "the page journal … moved under this run" (a run stopped for nothing).
      expect(result.lost).toBeUndefined();
      expect(await sql(db.url, `SELECT next_page, pages FROM webdata.series WHERE run_id = $1`, [RUN])).toEqual([{ next_page: 3, pages: 2 }]);
      expect((await sql(db.url, `SELECT page_key FROM webdata.pages ORDER BY seq`)).map((row) => row.page_key)).toEqual([`${x.id}#1`, `${x.id}#2`]);
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it("a PostgreSQL sink's page in a statement of its own lands once: its rows are in the table once", async () => {
    await using sim = await simulator({ seed: 7 });
    using dir = workdir();
    const db = await testDatabase();
    await using through = await cutProxy(db.url);
    try {
      let reached!: () => void;
      const atSecond = new Promise<void>((resolve) => (reached = resolve));
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      // The second page waits here until the sink's table is locked and its connection muted.
      const gate: Stage<NormalizedItem> = async function* (pages) {
        for await (const each of pages) {
          if (each.number === 2) {
            reached();
            await released;
          }
          yield each;
        }
      };
      const running = runOn(sim, {
        name: 'pool-cut',
        source: searchPages({ queries: ['espresso'], maxPages: 3 }),
        stages: [normalize(), gate],
        // The state in the SQLite sink's file: the PostgreSQL sink writes each page in a statement of its own.
        sinks: [toSqlite({ path: dir.path('out.sqlite') }), toPostgres({ url: through.url, table: 'results' })],
        rate: { concurrency: 1 },
      });
      await atSecond;
      await until(async () => (await sql(db.url, `SELECT 1 FROM public.webdata_checkpoints WHERE seq >= 1`)).length === 1, "the first page's checkpoint");
      const summary = await cutWhileWaiting(db.url, through, `SELECT 1 FROM public.webdata_checkpoints FOR UPDATE`, async () => {
        release();
        return running;
      });
      expect(summary.status).toBe('completed');
      const pages = (rows: Record<string, unknown>[]) => rows.map((row) => `${row.page}:${row.n}`);
      const inSqlite = sqliteRows(dir.path('out.sqlite'), 'SELECT page, COUNT(*) AS n FROM results GROUP BY page ORDER BY page');
      // Before: the second page's rows twice (the statement is not guarded: the cut session's landed beside the one sent again).
      expect(pages(await sql(db.url, 'SELECT page, COUNT(*)::int AS n FROM public.results GROUP BY page ORDER BY page'))).toEqual(pages(inSqlite));
      expect(inSqlite).toHaveLength(3);
    } finally {
      await db.drop();
    }
  });
});
