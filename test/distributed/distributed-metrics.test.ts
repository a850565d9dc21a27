// A distributed run's metrics (issue 31): each worker's points say which worker they come from, and every worker
// reports the run as a whole — its workers at work and its series by state — from the run's database.
import { expect, it } from 'vitest';
import { normalize, type NormalizedItem, searchPages, type Stage, toPostgres } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { registeredMeters } from '../observability/otel-metrics.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';
import { runOn } from '../pipeline-helpers.ts';

/** A stage that holds the page it sees second until `release`; `reached` resolves once it holds it. */
function gate(): { stage: Stage<NormalizedItem>; reached: Promise<void>; release: () => void } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let reached!: () => void;
  const holding = new Promise<void>((resolve) => (reached = resolve));
  let seen = 0;
  const stage: Stage<NormalizedItem> = async function* (pages) {
    for await (const page of pages) {
      seen += 1;
      if (seen === 2) {
        reached();
        await released;
      }
      yield page;
    }
  };
  return { stage, reached: holding, release };
}

describePostgres('a distributed run\'s metrics', () => {
  it('two workers in one process: each point names its worker; both report the run\'s workers at work and its series by state', async () => {
    const meters = registeredMeters();
    const db = await testDatabase();
    try {
      await using sim = await simulator({ seed: 12 });
      const queries = Array.from({ length: 8 }, (_, i) => `secret query ${i}`);
      const worker = (held: ReturnType<typeof gate>) =>
        runOn(
          sim,
          {
            name: 'fleet',
            source: searchPages({ queries, maxPages: 2 }),
            stages: [normalize(), held.stage],
            sinks: [toPostgres({ url: db.url, table: 'results' })],
            rate: { concurrency: 2 },
          },
          { stateUrl: db.url },
        );
      const first = gate();
      const second = gate();
      const runs = [worker(first), worker(second)];
      await Promise.all([first.reached, second.reached]);

      const { all, points } = await meters.collect();
      // One set of points per worker, each naming it.
      const workers = points('webdata_etl.run.workers');
      expect(workers.map((point) => point.value)).toEqual([2, 2]);
      expect(new Set(workers.map((point) => point.attributes['webdata_etl.worker.id'])).size).toBe(2);
      expect(points('webdata_etl.requests').every((point) => typeof point.attributes['webdata_etl.worker.id'] === 'string')).toBe(true);
      // Each worker's view of the series adds up to the plan; each holds one at its gate, so some are being paged.
      for (const id of workers.map((point) => point.attributes['webdata_etl.worker.id'])) {
        const states = points('webdata_etl.run.series').filter((point) => point.attributes['webdata_etl.worker.id'] === id);
        expect(states.map((point) => point.attributes['webdata_etl.state']).sort()).toEqual(['active', 'ended', 'waiting']);
        expect(states.reduce((total, point) => total + point.value, 0)).toBe(queries.length);
      }
      first.release();
      second.release();
      const summaries = await Promise.all(runs);
      expect(summaries.map((summary) => summary.status)).toEqual(['completed', 'completed']);
      expect(JSON.stringify(all)).not.toContain('secret');
    } finally {
      await meters.unregister();
      await db.drop();
    }
  });
});
