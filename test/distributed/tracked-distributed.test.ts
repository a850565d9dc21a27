// Depth until found in a distributed run (issue 42, item 2): three workers paging a run's series end each where one
// process alone ends it, fetch the same pages, and leave the same tracked ranks beside the rows.
import { expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.ts';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { runChild } from '../run/resume-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

const SIM = { seed: 41, day: 2, latencyMs: { min: 2, max: 10 } } as const;
const QUERIES = Array.from({ length: 8 }, (_, i) => `query ${i}`);

/** The pages each series was answered, as (query, country, page) sorted. */
function pagesServed(sim: Simulator): string[] {
  return sim
    .log()
    .filter((entry) => entry.status === 200)
    .map((entry) => {
      const params = new URLSearchParams(entry.query);
      return `${params.get('q')}|${params.get('country')}|${params.get('page')}`;
    })
    .sort();
}

describePostgres('depth until found, distributed', () => {
  it('three workers fetch exactly the pages one process does, and record the same tracked ranks', async () => {
    await using alone = await simulator(SIM);
    await using sim = await simulator(SIM);
    using aloneDir = workdir();
    using dir = workdir();
    const one = await testDatabase();
    const many = await testDatabase();
    try {
      // One domain first seen on page 2 of a series, one on page 1 of another: tracked in every series.
      const second = alone.ranking({ q: 'query 0', country: 'us', lang: '' }).find((result) => result.rank > 10 && result.rank <= 20)?.domain ?? '';
      const first = alone.ranking({ q: 'query 3', country: 'gb', lang: '' })[0]?.domain ?? '';
      const plan = { queries: QUERIES, countries: ['us', 'gb'], maxPages: 4, concurrency: 2, sinks: ['postgres'], track: { domains: [second, first] }, refresh: { depth: 'until-found', margin: 1 } };
      const single = await runChild({ ...plan, baseUrl: alone.url, dir: aloneDir.dir, postgresUrl: one.url, stateUrl: one.url }).done;
      expect(single.code).toBe(0);
      const spec = { ...plan, baseUrl: sim.url, dir: dir.dir, postgresUrl: many.url, stateUrl: many.url };
      const results = await Promise.all([runChild(spec).done, runChild(spec).done, runChild(spec).done]);
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.code).toBe(0);
      }
      expect(new Set(results.map((result) => result.summary?.runId)).size).toBe(1);
      // The work was shared, and it ended series by the found rule.
      expect(results.filter((result) => (result.summary?.worker?.pages ?? 0) > 0).length).toBeGreaterThan(1);
      const ended = await sql(many.url, `SELECT reason, count(*)::int AS n FROM public.results_outcomes GROUP BY reason ORDER BY reason`);
      expect(ended).toEqual(await sql(one.url, `SELECT reason, count(*)::int AS n FROM public.results_outcomes GROUP BY reason ORDER BY reason`));
      expect(ended.some((row) => row.reason === 'found')).toBe(true);
      expect(pagesServed(sim)).toEqual(pagesServed(alone));
      const tracked = (url: string) => sql(url, 'SELECT query, country, lang, domain, rank, searched FROM public.results_tracked ORDER BY query, country, domain');
      const expected = await tracked(one.url);
      expect(expected).toHaveLength(QUERIES.length * 2 * 2);
      expect(await tracked(many.url)).toEqual(expected);
    } finally {
      await one.drop();
      await many.drop();
    }
  });
});
