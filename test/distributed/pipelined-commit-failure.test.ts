import { afterEach, beforeEach, expect, it } from 'vitest';
import pg from 'pg';
import { normalize, searchPages, type Stage, toPostgres } from '../../src/index.ts';
import { WORKER_COMMIT_WINDOW_VARIABLE } from '../../src/distributed/postgres-host.ts';
import { rejection, simulator } from '../helpers.ts';
import { runOn } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

// A worker's page statements go down one pipelined connection (issue 43, item 5). A page statement that fails and
// stops the run, with pages of other series already sent behind it: those land (each is its own transaction, run in
// the order sent), the run stops. Every page must then be committed whole or not at all, and every paid answer counted
// once — in the spend ledger (committed with its page, or paid and not committed), the shared meter's debit, the run's
// summary — and the run resumed must fetch only the pages with no committed row.

const QUERIES = Array.from({ length: 12 }, (_, i) => `stop ${i}`);
/** The page whose statement fails: its rows meet a trigger of the test's. */
const FAILING = { query: QUERIES[0] as string, page: 2 };
const LOCK = 4343;

/** Waits (bounded) until `check` holds. */
async function until(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A last stage that counts the pages it passed on: each, once the next is asked for, handed to the committer. */
function counting(): { stage: Stage; handed: () => number; failingHanded: () => number | undefined } {
  let handed = 0;
  let failingAt: number | undefined;
  const stage: Stage = async function* (pages) {
    for await (const page of pages) {
      yield page;
      handed += 1;
      if (page.series.query === FAILING.query && page.number === FAILING.page) failingAt = handed;
    }
  };
  return { stage, handed: () => handed, failingHanded: () => failingAt };
}

describePostgres("a worker's pipelined commits: a page that fails mid-pipeline stops the run", () => {
  beforeEach(() => {
    process.env[WORKER_COMMIT_WINDOW_VARIABLE] = '8';
  });
  afterEach(() => {
    delete process.env[WORKER_COMMIT_WINDOW_VARIABLE];
  });

  it('every page is committed whole or not at all, each paid answer is counted once (ledger, meter, summary), and the resumed run fetches only what has no committed row', async () => {
    await using sim = await simulator({ seed: 43, latencyMs: { min: 0, max: 0 } });
    const db = await testDatabase();
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      const count = counting();
      // The failing page's statement waits for the test's lock, then fails (RAISE: neither the connection nor a value
      // the database refuses): the pages handed over behind it meanwhile are on the pipeline behind it. The trigger
      // is installed once the sink's table exists (the first page through the stages), before the failing page commits.
      await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
      let installed = false;
      const installing: Stage = async function* (pages) {
        for await (const page of pages) {
          if (!installed) {
            installed = true;
            await sql(
              db.url,
              `CREATE FUNCTION public.broken() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(${LOCK}); PERFORM pg_advisory_unlock(${LOCK}); RAISE EXCEPTION 'the test broke this page'; END $$;
               CREATE TRIGGER broken BEFORE INSERT ON public.results FOR EACH ROW WHEN (NEW.query = '${FAILING.query}' AND NEW.page = ${FAILING.page}) EXECUTE FUNCTION public.broken()`,
            );
          }
          yield page;
        }
      };
      const pipeline = {
        name: 'pipelined-stop',
        source: searchPages({ queries: QUERIES, maxPages: 4, count: 10 }),
        stages: [installing, normalize(), count.stage],
        sinks: [toPostgres({ url: db.url, table: 'results' })],
        state: { url: db.url },
        rate: { concurrency: 12 },
      };
      const running = rejection(runOn(sim, pipeline as never));
      await until(async () => (await sql(db.url, `SELECT 1 FROM pg_stat_activity WHERE wait_event = 'advisory' AND datname = current_database()`)).length > 0, 'the failing page waiting on the lock');
      await until(() => (count.failingHanded() ?? Infinity) + 4 <= count.handed(), 'four pages handed over behind the failing one');
      const [before] = await sql(db.url, `SELECT SUM(pages)::int AS pages FROM webdata.series`);
      await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      const error = await running;
      expect(error.message).toMatch(/the test broke this page/);

      // Pages sent behind the failing one landed after it failed (the pipeline was held up behind it till then).
      const [after] = await sql(db.url, `SELECT SUM(pages)::int AS pages FROM webdata.series`);
      expect(after?.pages as number).toBeGreaterThan(before?.pages as number);
      // Each page committed whole (its rows, the series' place and counts) or not at all.
      const committed = await sql(
        db.url,
        `SELECT s.query, s.pages, s.next_page, s.items_written AS written, (SELECT COUNT(DISTINCT r.page)::int FROM public.results r WHERE r.query = s.query) AS result_pages,
                (SELECT COUNT(*)::int FROM public.results r WHERE r.query = s.query) AS result_rows, (SELECT COALESCE(MAX(r.page), 0)::int FROM public.results r WHERE r.query = s.query) AS last
           FROM webdata.series s ORDER BY s.query`,
      );
      for (const row of committed) expect(row).toMatchObject({ result_pages: row.pages, result_rows: row.written, last: row.pages, next_page: (row.pages as number) + 1 });
      expect(committed.find((row) => row.query === FAILING.query)?.pages).toBe(FAILING.page - 1);
      const pagesCommitted = committed.reduce((sum, row) => sum + (row.pages as number), 0);

      // Every answer paid once: the ledger (a row an answer, committed with a page or paid and not committed), the
      // meter's debit, the summary's credits — each the simulator's count. (A page's commit takes every answer of its
      // series recorded by then, the next page's too if it was answered before this page left the stages: the rows
      // committed are not one a page.)
      const debited = sim.stats().credits.main?.debited ?? 0;
      const [ledger] = await sql(db.url, `SELECT COUNT(*)::int AS rows, SUM(credits)::float8 AS credits, SUM(credits) FILTER (WHERE uncommitted)::float8 AS uncommitted FROM webdata.spend`);
      expect(ledger).toMatchObject({ rows: debited, credits: debited });
      expect(ledger?.uncommitted as number).toBeLessThanOrEqual(debited - pagesCommitted);
      expect(await sql(db.url, `SELECT spent, reserved FROM webdata.run_limits`)).toEqual([{ spent: debited, reserved: 0 }]);
      const [run] = await sql(db.url, `SELECT status, summary FROM webdata.runs`);
      expect(run?.status).toBe('interrupted');
      const summary = JSON.parse(run?.summary as string) as { credits: { spent: number; uncommitted: number } };
      expect(summary.credits).toMatchObject({ spent: debited, uncommitted: ledger?.uncommitted });

      // Resumed once the trigger is gone: only the pages with no committed row are fetched, and each lands once.
      await sql(db.url, `DROP TRIGGER broken ON public.results`);
      const resumed = await runOn(sim, pipeline as never);
      expect(resumed.status).toBe('completed');
      const [final] = await sql(db.url, `SELECT SUM(pages)::int AS pages FROM webdata.series`);
      const fetchedAgain = (sim.stats().credits.main?.debited ?? 0) - debited;
      expect(fetchedAgain).toBe((final?.pages as number) - pagesCommitted);
      expect(await sql(db.url, `SELECT COUNT(*)::int AS n FROM (SELECT query, page, position FROM public.results GROUP BY 1, 2, 3 HAVING COUNT(*) > 1) twice`)).toEqual([{ n: 0 }]);
    } finally {
      await holder.end();
      await db.drop();
    }
  }, 60_000);
});
