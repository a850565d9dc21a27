// The refresh planner in a distributed run (issue 42, item 3): the process that plans the run plans its refresh once,
// records the series it skips before the queue is filled, and no worker requests them; every worker's summary says
// the same plan.
import { expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { runChild } from '../run/resume-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

const QUERIES = Array.from({ length: 16 }, (_, i) => `query ${i}`);

describePostgres('the refresh planner, distributed', () => {
  it('plans once: the series it skips never enter the queue, are never requested, and are recorded skipped', async () => {
    await using sim = await simulator({ seed: 41, day: 0, latencyMs: { min: 2, max: 10 } });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const domain = sim.ranking({ q: 'query 0', country: 'us', lang: '' })[4]?.domain ?? '';
      const plan = { queries: QUERIES, countries: ['us'], maxPages: 4, concurrency: 2, sinks: ['postgres'], track: { domains: [domain] }, baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url };
      // Two days every series is fetched (no budget), then one whose budget pays for a part of them.
      for (let day = 0; day < 2; day++) {
        expect((await runChild({ ...plan, refresh: { depth: 'until-found', priority: 'changes' } }).done).code).toBe(0);
        sim.advanceDay();
      }
      const from = sim.log().length;
      const spec = { ...plan, refresh: { depth: 'until-found', priority: 'changes' }, budget: 20 } as const;
      const results = await Promise.all([runChild(spec).done, runChild(spec).done, runChild(spec).done]);
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.code).toBe(0);
      }
      const runIds = new Set(results.map((result) => result.summary?.runId));
      expect(runIds.size).toBe(1);
      const runId = [...runIds][0] as string;
      const skipped = (await sql(db.url, `SELECT query FROM webdata.series WHERE run_id = $1 AND reason = 'skipped' ORDER BY query`, [runId])).map((row) => row.query as string);
      expect(skipped.length).toBeGreaterThan(0);
      const asked = new Set(sim.log().slice(from).filter((entry) => entry.status === 200).map((entry) => new URLSearchParams(entry.query).get('q')));
      for (const query of skipped) expect(asked.has(query)).toBe(false);
      expect(sim.log().slice(from).filter((entry) => entry.status === 200).length).toBeLessThanOrEqual(20);
      // Every worker's summary says the plan the run opened with, and the skipped count.
      for (const result of results) {
        expect(result.summary?.series.skipped).toBe(skipped.length);
        expect(result.summary?.refresh).toMatchObject({ budgetPages: 20, priority: 'changes' });
      }
      const outcomes = await sql(db.url, `SELECT query FROM public.results_outcomes WHERE run_id = $1 AND reason = 'skipped' ORDER BY query`, [runId]);
      expect(outcomes.map((row) => row.query)).toEqual(skipped);
    } finally {
      await db.drop();
    }
  });
});
