import { expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { config, envFor, startCli } from '../cli-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

/** `promise`, or a failure naming `what` once `seconds` have passed (a bound on a wait, not a guess at its length). */
function within<T>(seconds: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within ${seconds} s: ${what}`)), seconds * 1000);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describePostgres('a page refused while its worker still holds the series’ job (the fleet’s end)', () => {
  it('a series whose last page was refused goes back to the queue, is ended from what is committed, and the worker exits: the run does not wait for it forever', async () => {
    await using sim = await simulator({ seed: 43, latencyMs: { min: 5, max: 20 } });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, { name: 'refused', sinks: [{ type: 'postgres', table: 'results', url: db.url }], state: { url: db.url }, rate: { concurrency: 2 } }, { queries: ['query 0', 'query 1', 'query 2'], countries: ['us'], maxPages: 2 });
      // The series' last page is held while its first is committed.
      const last = sim.park({ q: 'query 0', page: 2 });
      const worker = startCli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      await worker.whileRunning(last.reached(1));
      // Another worker committed that page meanwhile (one that came back from a pause and landed its page first, as
      // docs/distributed.md tells): the series' row is past it, while this worker still holds the series' job.
      const moved = await sql(db.url, `UPDATE webdata.series SET next_page = 3, pages = 2 WHERE query = 'query 0' AND next_page = 2 RETURNING 1`);
      expect(moved).toHaveLength(1);
      last.release();
      // Its page is refused; the page ended the series by its own rule (its last page): before, the job stayed this
      // worker's, touched at every beat, and the worker waited for the series' end with it — for ever.
      const ended = await within(30, 'the worker exits', worker.done).finally(() => worker.child.kill('SIGKILL'));
      expect(ended.code, ended.stderr).toBe(0);
      const series = await sql(db.url, `SELECT query, status FROM webdata.series ORDER BY query`);
      expect(series).toEqual([
        { query: 'query 0', status: 'ended' },
        { query: 'query 1', status: 'ended' },
        { query: 'query 2', status: 'ended' },
      ]);
      // The refused page was not written: its rows are the other worker's to write.
      const rows = await sql(db.url, `SELECT count(*)::int AS n FROM public.results WHERE query = 'query 0' AND page = 2`);
      expect(rows).toEqual([{ n: 0 }]);
    } finally {
      await db.drop();
    }
  });
});
