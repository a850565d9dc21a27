import pg from 'pg';
import { expect, it } from 'vitest';
import { seriesStates } from '../../src/pipeline/context.ts';
import type { Page, Series } from '../../src/pipeline/page.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { createCommitter } from '../../src/run/commit.ts';
import type { StateStore } from '../../src/state/interfaces.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { cutProxy, lockWaiters, until } from '../postgres/cut-proxy.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { spendRowOf } from './spend-rows.ts';

// A worker's page statements go down one pipelined connection (issue 43, item 5): handed over at once, the next
// page's statement is sent while the one before is on its way. Before, the worker's store took a page only once the
// one before had committed (`queuesCommits`: false), so never more than one page was in the store at a time; these
// tests hold the pipeline to the commit contract: the pages of a series in order, one refused (the fence, a value)
// mid-pipeline writing nothing of itself, and the pages of its series behind it refused or emptied with it.

const RUN = 'run-1';
const seriesOf = (q: string): Series => ({ id: `search|${q}||`, endpoint: '/searchengine/search', query: q, country: '', lang: '' });

function page(series: Series, number: number, key = `${series.id}#${number}`): Page<unknown> {
  return { key, series, number, items: [], meta: { status: 200, requestId: undefined, fetchedAt: '2026-11-27T00:00:00.000Z', latencyMs: 0, bytes: 0, served: 0 } } as Page<unknown>;
}

/** The store with the most pages it held at once (handed over, not yet settled) counted. */
function counted(store: StateStore): { store: StateStore; most(): number } {
  let held = 0;
  let most = 0;
  const commitPage: StateStore['commitPage'] = (commit) => {
    held += 1;
    most = Math.max(most, held);
    return store.commitPage(commit).finally(() => {
      held -= 1;
    });
  };
  return { store: { ...store, commitPage }, most: () => most };
}

/**
 * A worker's store and committer on a new database, the journal kept (a row per committed page). `through`: the
 * pipelined connection goes there (a proxy) instead of to the database.
 */
async function worker(options: { proxied?: boolean } = {}) {
  const db = await testDatabase();
  const through = options.proxied ? await cutProxy(db.url) : undefined;
  const pool = new pg.Pool({ connectionString: db.url, max: 4 });
  const shared = await postgresStateStore(pool, postgresTarget(through?.url ?? db.url), { schema: 'webdata', pipeline: 'p' });
  const watched = counted(shared.fenced({ workerId: 'w1', finish: async () => true, committed: () => undefined }));
  await watched.store.startRun({ runId: RUN, pipeline: 'p', startedAt: '2026-11-27T00:00:00.000Z', fingerprint: 'f', plan: {}, budget: null });
  const committer = createCommitter({ store: watched.store, runId: RUN, sinks: [], states: seriesStates(), keepJournal: true });
  await committer.start();
  const journal = async () => (await sql(db.url, `SELECT page_key FROM webdata.pages ORDER BY seq`)).map((row) => row.page_key);
  const series = async () => sql(db.url, `SELECT query, next_page, pages FROM webdata.series WHERE run_id = $1 ORDER BY query`, [RUN]);
  return {
    db,
    through,
    committer,
    most: watched.most,
    journal,
    series,
    async [Symbol.asyncDispose]() {
      await committer.close();
      await pool.end();
      await through?.[Symbol.asyncDispose]();
      await db.drop();
    },
  };
}

describePostgres("a worker's pipelined commits", () => {
  it('pages of two series handed over at once are in the store together, and each commits once, in its order', async () => {
    await using w = await worker();
    const [a, b] = [seriesOf('a'), seriesOf('b')];
    const pages = Array.from({ length: 20 }, (_, i) => [page(a, i + 1), page(b, i + 1)]).flat();
    const results = await Promise.all(pages.map((each) => w.committer.commit(each)));
    expect(results.filter((result) => result.lost)).toEqual([]);
    // Before: 1 (each page handed to the store once the one before had committed).
    expect(w.most()).toBeGreaterThan(1);
    expect(await w.series()).toEqual([
      { query: 'a', next_page: 21, pages: 20 },
      { query: 'b', next_page: 21, pages: 20 },
    ]);
    expect(await w.journal()).toEqual(pages.map((each) => each.key));
  });

  it('a page the fence refuses mid-pipeline writes nothing, nor do the pages of its series behind it; the other series commits whole', async () => {
    await using w = await worker();
    const [x, y] = [seriesOf('x'), seriesOf('y')];
    await Promise.all([w.committer.commit(page(x, 1)), w.committer.commit(page(y, 1))]);
    // Another worker holds x's row (it is taking the series over): the pipeline's next statement waits for it.
    const other = new pg.Client({ connectionString: w.db.url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(`SELECT 1 FROM webdata.series WHERE run_id = $1 AND series_id = $2 FOR UPDATE`, [RUN, x.id]);
      const pages = [2, 3, 4, 5].flatMap((number) => [page(x, number), page(y, number)]);
      const committing = Promise.all(pages.map((each) => w.committer.commit(each)));
      await until(async () => (await sql(w.db.url, `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`)).length > 0, "the pipeline's statement waiting for x's row");
      // ... and moves it on past this worker's pages.
      await other.query(`UPDATE webdata.series SET next_page = 100 WHERE run_id = $1 AND series_id = $2`, [RUN, x.id]);
      await other.query('COMMIT');
      const results = await committing;
      expect(results.map((result) => result.lost === true)).toEqual([true, false, true, false, true, false, true, false]);
    } finally {
      await other.end();
    }
    expect(w.most()).toBeGreaterThan(1);
    expect(await w.series()).toEqual([
      { query: 'x', next_page: 100, pages: 1 },
      { query: 'y', next_page: 6, pages: 5 },
    ]);
    expect(await w.journal()).toEqual([`${x.id}#1`, `${y.id}#1`, ...[2, 3, 4, 5].map((number) => `${y.id}#${number}`)]);
    expect(w.committer.lost(x.id)).toBe(true);
  });

  it('a page whose value the database refuses mid-pipeline commits emptied, and so do the pages of its series sent behind it; the other series commits whole', async () => {
    await using w = await worker();
    const [x, y] = [seriesOf('x'), seriesOf('y')];
    // A journal entry the table refuses (23514), for x's second page only.
    await sql(w.db.url, `ALTER TABLE webdata.pages ADD CONSTRAINT no_refused CHECK (page_key NOT LIKE '%refused')`);
    const pages = [1, 2, 3, 4].flatMap((number) => [page(x, number, number === 2 ? `${x.id}#2 refused` : undefined), page(y, number)]);
    const results = await Promise.all(pages.map((each) => w.committer.commit(each)));
    expect(results.filter((result) => result.lost)).toEqual([]);
    expect(w.most()).toBeGreaterThan(1);
    // x's pages 2 to 4 took their place (the series where a retry begins) without their journal entries.
    expect(await w.series()).toEqual([
      { query: 'x', next_page: 5, pages: 4 },
      { query: 'y', next_page: 5, pages: 4 },
    ]);
    expect(await w.journal()).toEqual([`${x.id}#1`, ...[1, 2, 3, 4].map((number) => `${y.id}#${number}`)]);
    expect(w.committer.refused(x.id)?.message).toMatch(/page 2 of series search\|x\|\| could not be stored/);
  });
});

/** The spend ledger's rows by series: committed with their page, or written as paid and not committed. */
const ledger = (url: string) =>
  sql(url, `SELECT series_id AS series, COUNT(*) FILTER (WHERE NOT uncommitted)::int AS committed, COUNT(*) FILTER (WHERE uncommitted)::int AS uncommitted FROM webdata.spend GROUP BY 1 ORDER BY 1`);

describePostgres("a worker's pipelined commits, when the connection is cut", () => {
  it('after a failure that stops the run: a page sent behind the failed one that landed, its answer lost with the connection, is committed, not paid-and-not-committed: each answer in the ledger once', async () => {
    await using w = await worker({ proxied: true });
    const through = w.through as NonNullable<typeof w.through>;
    const [x, y] = [seriesOf('x'), seriesOf('y')];
    // Each page brings its own paid answer into its commit.
    const commit = (each: Page<unknown>) => {
      void w.committer.spend(spendRowOf({ runId: RUN, seriesId: each.series.id }));
      return w.committer.commit(each);
    };
    await Promise.all([commit(page(x, 1)), commit(page(y, 1))]);
    // x's second page fails as a statement (a trigger of the test's: neither the connection nor a refused value), and
    // stops the run; y's, sent behind it, lands, but the server's answers no longer reach the worker, and then the
    // connection is cut.
    await sql(w.db.url, `CREATE FUNCTION webdata.broken() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the test broke this page'; END $$`);
    await sql(w.db.url, `CREATE TRIGGER broken BEFORE INSERT ON webdata.pages FOR EACH ROW WHEN (NEW.page_key = '${x.id}#2') EXECUTE FUNCTION webdata.broken()`);
    through.mute();
    const results = [commit(page(x, 2)), commit(page(y, 2))].map((each) => each.then(() => 'committed', (error: Error) => error.message));
    await until(async () => (await w.series()).some((row) => row.query === 'y' && row.next_page === 3), "y's second page landed");
    through.cut();
    expect(await results[0]).toMatch(/the test broke this page/);
    await Promise.all(results);
    await w.committer.flush();
    // y's second page is committed with its items and journal entry, x's is not.
    expect(await w.series()).toEqual([
      { query: 'x', next_page: 2, pages: 1 },
      { query: 'y', next_page: 3, pages: 2 },
    ]);
    expect(await w.journal()).toEqual([`${x.id}#1`, `${y.id}#1`, `${y.id}#2`]);
    // Four answers paid, each once: x's second as paid and not committed (a resume fetches it again), y's second with
    // its page. Before: y's second was also written as paid and not committed (the pipeline failed it with x's
    // failure without asking whether it had landed): 5 rows, y's spend counted twice.
    expect(await ledger(w.db.url)).toEqual([
      { series: x.id, committed: 1, uncommitted: 1 },
      { series: y.id, committed: 2, uncommitted: 0 },
    ]);
  });

  it("a page whose answer was lost with the connection while the server still ran it lands once: the server's session ends before the page is asked after or sent again", async () => {
    await using w = await worker({ proxied: true });
    const through = w.through as NonNullable<typeof w.through>;
    const x = seriesOf('x');
    const commit = (each: Page<unknown>) => {
      void w.committer.spend(spendRowOf({ runId: RUN, seriesId: each.series.id }));
      return w.committer.commit(each);
    };
    await commit(page(x, 1));
    const waiting = () => lockWaiters((text) => sql(w.db.url, text));
    // Another session holds x's row: x's second page, down the pipeline, waits for it on the server...
    const other = new pg.Client({ connectionString: w.db.url });
    await other.connect();
    let result: Awaited<ReturnType<typeof commit>>;
    try {
      await other.query('BEGIN');
      await other.query(`SELECT 1 FROM webdata.series WHERE run_id = $1 AND series_id = $2 FOR UPDATE`, [RUN, x.id]);
      through.mute();
      const committing = commit(page(x, 2));
      await until(async () => (await waiting()).length === 1, "the pipeline's statement waiting for x's row");
      const [pipelined] = await waiting();
      // ... when its connection is cut: the worker hears nothing of it, but the server's session still waits to run it.
      through.cut();
      await until(async () => (await waiting()).some((pid) => pid !== pipelined), 'the page sent again, waiting for the row');
      await other.query('COMMIT');
      result = await committing;
    } finally {
      await other.end();
    }
    await w.committer.flush();
    // Before: the cut session's statement landed first, and the page sent again was refused by the fence (the series
    // past it): the page was taken for lost (the series dropped as another worker's) and its answer written twice.
    expect(result.lost).toBeUndefined();
    expect(await w.series()).toEqual([{ query: 'x', next_page: 3, pages: 2 }]);
    expect(await w.journal()).toEqual([`${x.id}#1`, `${x.id}#2`]);
    expect(await ledger(w.db.url)).toEqual([{ series: x.id, committed: 2, uncommitted: 0 }]);
  });
});
