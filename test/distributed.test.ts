import { expect, it } from 'vitest';
import { simulator } from './helpers.ts';
import { workdir } from './pipeline-helpers.ts';
import { runChild } from './resume-helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

const SIM = { seed: 41, latencyMs: { min: 5, max: 20 } } as const;
const QUERIES = Array.from({ length: 12 }, (_, i) => `query ${i}`);
const PLAN = { queries: QUERIES, countries: ['us', 'gb'], maxPages: 4, concurrency: 2, sinks: ['postgres'] };

/** A table's rows as comparable text: the columns that do not vary between runs. */
async function stableTable(url: string, table: string): Promise<string[]> {
  const rows = await sql(url, `SELECT query, country, lang, page, position, rank, title, url, domain, snippet, dedupe_key FROM ${table}`);
  return rows.map((row) => JSON.stringify(Object.values(row))).sort();
}

describePostgres('a distributed run: many workers share one run on PostgreSQL', () => {
  it('three workers complete a run whose rows equal one process running it alone; each page is paid once', async () => {
    // One process alone.
    await using alone = await simulator(SIM);
    using dir = workdir();
    const one = await testDatabase();
    const many = await testDatabase();
    try {
      const single = await runChild({ ...PLAN, baseUrl: alone.url, dir: dir.dir, postgresUrl: one.url, stateUrl: one.url }).done;
      expect(single.stderr).not.toContain('ERROR');
      expect(single.code).toBe(0);
      expect(single.summary?.status).toBe('completed');
      expect(single.summary?.worker?.pages).toBe(single.summary?.pages.fetched);

      // Three workers started together on the same pipeline and database.
      await using shared = await simulator(SIM);
      const spec = { ...PLAN, baseUrl: shared.url, dir: dir.dir, postgresUrl: many.url, stateUrl: many.url };
      const results = await Promise.all([runChild(spec).done, runChild(spec).done, runChild(spec).done]);
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.code).toBe(0);
        expect(result.summary?.status).toBe('completed');
      }
      const runIds = new Set(results.map((result) => result.summary?.runId));
      expect(runIds.size).toBe(1);
      // The work was shared, and every page committed once: the shares add up to the run's pages.
      const shares = results.map((result) => result.summary?.worker?.pages ?? 0);
      expect(shares.reduce((a, b) => a + b, 0)).toBe(single.summary?.pages.fetched);
      expect(await stableTable(many.url, 'results')).toEqual(await stableTable(one.url, 'results'));
      expect(shared.stats().credits.main?.debited).toBe(alone.stats().credits.main?.debited);
      const workers = await sql(many.url, `SELECT status, stopped_at IS NOT NULL AS stopped FROM webdata.workers`);
      expect(workers).toHaveLength(3);
      expect(workers.every((w) => w.stopped === true)).toBe(true);
    } finally {
      await one.drop();
      await many.drop();
    }
  });

  it('a worker killed with SIGKILL mid-run: the others take its series over and complete the run; it cost at most its requests in flight', async () => {
    await using alone = await simulator(SIM);
    await using sim = await simulator(SIM);
    using dir = workdir();
    const one = await testDatabase();
    const many = await testDatabase();
    try {
      expect((await runChild({ ...PLAN, baseUrl: alone.url, dir: dir.dir, postgresUrl: one.url, stateUrl: one.url }).done).code).toBe(0);
      const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, postgresUrl: many.url, stateUrl: many.url };
      const victim = runChild(spec);
      const others = [runChild(spec), runChild(spec)];
      // Killed once it has committed pages, so that it holds series part way, while the others work.
      await victim.pagesCommitted(3);
      victim.child.kill('SIGKILL');
      expect((await victim.done).signal).toBe('SIGKILL');
      const results = await Promise.all(others.map((other) => other.done));
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.code).toBe(0);
        expect(result.summary?.status).toBe('completed');
      }
      expect(await stableTable(many.url, 'results')).toEqual(await stableTable(one.url, 'results'));
      // Paid twice: at most the requests the victim had in flight (its concurrency).
      expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual((alone.stats().credits.main?.debited ?? 0) + PLAN.concurrency);
    } finally {
      await one.drop();
      await many.drop();
    }
  });

  it("a budget below the run's need, over three workers: the simulator debits exactly the budget, never more", async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const db = await testDatabase();
    try {
      const spec = { ...PLAN, budget: 31, baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url };
      const results = await Promise.all([runChild(spec).done, runChild(spec).done, runChild(spec).done]);
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.summary?.status).toBe('budget');
      }
      expect(sim.stats().credits.main?.debited).toBe(31);
      const [limits] = await sql(db.url, 'SELECT spent, reserved FROM webdata.run_limits');
      expect(limits).toEqual({ spent: 31, reserved: 0 });
    } finally {
      await db.drop();
    }
  });
});
