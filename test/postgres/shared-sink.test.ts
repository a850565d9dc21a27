// A sink object holds one run's state between its open and its close. Two runs of one process at once that share it
// (two workers of a distributed run started in one program with one pipeline object) used to go wrong late and
// obscurely: the first to close closed it under the other ("the PostgreSQL sink … was not opened"). The second is
// now refused as it opens, by the sink's name, before it joins the run; the first goes on untouched.
import { expect, it } from 'vitest';
import { normalize, searchPages, toPostgres } from '../../src/index.ts';
import { UsageError } from '../../src/errors/index.ts';
import { rejection, simulator } from '../helpers.ts';
import { describePostgres, testDatabase } from './pg.ts';
import { runOn } from '../pipeline-helpers.ts';

describePostgres('a sink shared by two runs of one process at once', () => {
  it('is refused to the second as it opens, naming the sink; the first completes, and the sink serves a later run', async () => {
    const db = await testDatabase();
    try {
      await using sim = await simulator();
      const pipeline = {
        name: 'shared-sink',
        source: searchPages({ queries: ['a', 'b', 'c', 'd'], maxPages: 2 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'results' })],
      };
      // The simulator holds every request: the first run is at work, its sink open (sinks open before any request).
      const held = sim.park();
      const first = runOn(sim, pipeline, { stateUrl: db.url });
      await held.reached();
      const refused = await rejection(runOn(sim, pipeline, { stateUrl: db.url }));
      expect(refused).toBeInstanceOf(UsageError);
      expect(refused.message).toContain('the postgres sink');
      expect(refused.message).toContain('is open in another run of this process');
      held.release();
      const summary = await first;
      expect(summary.status).toBe('completed');
      expect(summary.worker?.pages ?? summary.pages.fetched).toBe(summary.pages.fetched);
      // Closed by its run, the sink is free again: the same pipeline object runs once more.
      expect((await runOn(sim, pipeline, { stateUrl: db.url })).status).toBe('completed');
    } finally {
      await db.drop();
    }
  });
});
