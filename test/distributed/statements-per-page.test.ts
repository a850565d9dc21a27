import { expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { runChild } from '../run/resume-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

// The database's cost per page of a distributed run (issue 43, item 2; docs/distributed.md#sizing-a-fleet-and-its-database):
// a page's slot on the run's row carries the shared meter's settles and reserves its request's credit, and a worker's
// beat touches its jobs in one statement. Before, a page cost three statements on the run's row (the slot, the
// reservation, the settle), each its own transaction, and a beat one statement per job held.

const SIM = { seed: 43, latencyMs: { min: 5, max: 20 } } as const;
const BUDGET = 150;
const SERIES = 200;

/** The statistics of the database's sessions, once every other session has ended (a backend's reach the server as it exits). */
async function settledStats(url: string, name: string) {
  for (let tries = 0; tries < 200; tries++) {
    const [open] = await sql(url, `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [name]);
    if (open?.n === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const [db] = await sql(url, `SELECT (xact_commit + xact_rollback)::int AS xacts FROM pg_stat_database WHERE datname = $1`, [name]);
  const tables = await sql(url, `SELECT relname, (n_tup_ins + n_tup_upd + n_tup_del)::int AS writes FROM pg_stat_user_tables WHERE schemaname = 'webdata'`);
  return { xacts: Number(db?.xacts), writes: Object.fromEntries(tables.map((row) => [String(row.relname), Number(row.writes)])) };
}

describePostgres('the database\'s cost per page of a distributed run', () => {
  it('two workers under a budget: one write of the run\'s row a page, fewer transactions a page, and the budget to the credit', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const db = await testDatabase();
    try {
      const queries = Array.from({ length: SERIES }, (_, i) => `cost ${i}`);
      const spec = { queries, countries: ['us'], maxPages: 1, concurrency: 2, sinks: ['postgres'], budget: BUDGET, baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url };
      const before = await settledStats(db.url, db.name);
      const results = await Promise.all([runChild(spec).done, runChild(spec).done]);
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.code).toBe(0);
        expect(result.summary?.status).toBe('budget');
      }
      const after = await settledStats(db.url, db.name);
      const pages = results.reduce((sum, result) => sum + (result.summary?.worker?.pages ?? 0), 0);
      // The budget to the credit: every credit spent on a page, paid once, none past it.
      expect(pages).toBe(BUDGET);
      expect(sim.stats().credits.main?.debited).toBe(BUDGET);
      const [limits] = await sql(db.url, `SELECT spent, reserved, uncertain FROM webdata.run_limits`);
      expect(limits).toEqual({ spent: BUDGET, reserved: 0, uncertain: 0 });
      const credits = await sql(db.url, `SELECT sum(credits)::int AS credits, sum(reserved)::int AS reserved FROM webdata.workers`);
      expect(credits).toEqual([{ credits: BUDGET, reserved: 0 }]);

      const perPage = (table: string) => ((after.writes[table] ?? 0) - (before.writes[table] ?? 0)) / pages;
      const transactions = (after.xacts - before.xacts) / pages;
      // Before: 3.0 writes of the run's row a page (slot, reservation, settle), 3.1 of the workers' rows (reservation,
      // settle, the page's count), and 7.7 transactions a page over the whole run, its start and close included;
      // after: 1.2, 2.2 and 5.1. Bounds with room for beats and for settles an idle moment writes alone.
      expect({ runRow: perPage('run_limits') <= 1.5, workerRows: perPage('workers') <= 2.6, transactions: transactions <= 6.2 }, JSON.stringify({ runRow: perPage('run_limits'), workerRows: perPage('workers'), transactions })).toEqual({ runRow: true, workerRows: true, transactions: true });
    } finally {
      await db.drop();
    }
  });
});
