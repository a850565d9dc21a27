// Items a stage drops are counted (issue 38, item 21): `npm start` served 270 items and wrote 243 with 2 duplicates,
// and the 25 its own stage left out (link aggregators) were nowhere in the summary. Now `items.dropped` has them, so
// that served = written + duplicates + dropped: in the summary, its line on stderr, and `runs`; across the invocations
// of a resumed run and the workers of a distributed one, whose summary is assembled from the store.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunSummary } from '../../src/index.ts';
import { cli, ROOT } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';
import { runChild } from './resume-helpers.ts';

const SIM = { seed: 38, latencyMs: { min: 2, max: 10 } } as const;
/** The fixture's rank tracking with a last stage of its own that drops two aggregators, as rank-tracking.ts does. */
const PLAN = { queries: ['espresso', 'kettle', 'grinder', 'tamper'], countries: ['us', 'gb'], maxPages: 4, concurrency: 2, dropDomains: ['www.reddit.com', 'news.ycombinator.com'] };

/** The summary's items add up, with some dropped. */
function accounted(summary: RunSummary | undefined): RunSummary['items'] {
  const items = summary?.items as RunSummary['items'];
  expect(items.dropped).toBeGreaterThan(0);
  expect(items.served).toBe(items.written + items.duplicates + items.dropped);
  return items;
}

describe('items dropped by a stage are counted', () => {
  it("npm start's pipeline: served = written + duplicates + dropped in the summary, its line on stderr, and runs (table and --json)", async () => {
    using dir = workdir();
    const ran = await cli(['run', join(ROOT, 'pipelines/rank-tracking.ts'), '--simulator'], { cwd: dir.dir });
    expect(ran.code).toBe(0);
    const summary = JSON.parse(ran.stdout) as RunSummary;
    const items = accounted(summary);
    // The rows are the ones written, and none is an aggregator's: the stage dropped them all.
    expect(sqliteRows(dir.path('data/rank.sqlite'), 'SELECT count(*) AS n FROM results')).toEqual([{ n: items.written }]);
    expect(sqliteRows(dir.path('data/rank.sqlite'), `SELECT count(*) AS n FROM results WHERE domain IN ('www.reddit.com', 'news.ycombinator.com')`)).toEqual([{ n: 0 }]);
    expect(ran.stderr).toContain(`${items.written} rows (${items.duplicates} duplicates, ${items.dropped} dropped by stages)`);

    const listed = await cli(['runs', 'data/rank.sqlite', '--json'], { cwd: dir.dir });
    expect(JSON.parse(listed.stdout)).toMatchObject({ runId: summary.runId, rows: items.written, items });
    const table = await cli(['runs', 'data/rank.sqlite'], { cwd: dir.dir });
    expect(table.stdout).toContain(`${items.written} (${items.dropped} dropped)`);
  });

  it('a resumed run counts what every invocation dropped, as one uninterrupted run does', async () => {
    await using sim = await simulator(SIM);
    await using alone = await simulator(SIM);
    using dir = workdir();
    using other = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir };
    const uninterrupted = accounted((await runChild({ ...spec, baseUrl: alone.url, dir: other.dir }).done).summary);

    // Killed once its fourth page is committed, then run again: the run resumes.
    expect((await runChild(spec, { WEBDATA_CRASH_AT: 'after-commit:4' }).done).signal).toBe('SIGKILL');
    const resumed = await runChild(spec).done;
    expect(resumed.summary?.status).toBe('completed');
    expect(resumed.pages).toBeLessThan(resumed.summary?.pages.fetched ?? 0);
    expect(accounted(resumed.summary)).toEqual(uninterrupted);
  });
});

describePostgres('items dropped by a stage, in a distributed run', () => {
  it("two workers' run, its summary assembled from the store, counts what both dropped, as one process does", async () => {
    await using sim = await simulator(SIM);
    await using alone = await simulator(SIM);
    using dir = workdir();
    const one = await testDatabase();
    const shared = await testDatabase();
    try {
      const single = await runChild({ ...PLAN, sinks: ['postgres'], baseUrl: alone.url, dir: dir.dir, postgresUrl: one.url, stateUrl: one.url }).done;
      expect(single.code).toBe(0);
      const expected = accounted(single.summary);

      const spec = { ...PLAN, sinks: ['postgres'], baseUrl: sim.url, dir: dir.dir, postgresUrl: shared.url, stateUrl: shared.url };
      const workers = await Promise.all([runChild(spec).done, runChild(spec).done]);
      for (const worker of workers) {
        expect(worker.code).toBe(0);
        expect(worker.summary?.status).toBe('completed');
        // Each worker's summary is the whole run's.
        expect(accounted(worker.summary)).toEqual(expected);
      }
      expect(new Set(workers.map((worker) => worker.summary?.runId)).size).toBe(1);
      // The workers' shares add up to the run's pages: the counts are the run's, not the worker's own.
      expect(workers.reduce((pages, worker) => pages + (worker.summary?.worker?.pages ?? 0), 0)).toBe(single.summary?.pages.fetched);
    } finally {
      await one.drop();
      await shared.drop();
    }
  });
});
