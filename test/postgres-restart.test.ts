import { expect, it } from 'vitest';
import { simulator, until } from './helpers.ts';
import { workdir } from './pipeline-helpers.ts';
import type { Cluster } from './pg-cluster.ts';
import { describePrivateCluster, privateCluster, sql } from './pg.ts';
import { runChild } from './resume-helpers.ts';

const SIM = { seed: 21, latencyMs: { min: 2, max: 12 } } as const;
const PLAN = { queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 3, concurrency: 2 };

const stableRows = async (url: string) =>
  (await sql(url, 'SELECT query, country, lang, page, position, rank, title, url, dedupe_key FROM results')).map((row) => JSON.stringify(Object.values(row))).sort();

/**
 * A private cluster (the tests stop and start it) with two databases: `a` for the uninterrupted reference run,
 * `b` for the run the server goes away under. Removed afterwards.
 */
async function withCluster(test: (cluster: Cluster, db: (name: 'a' | 'b') => string) => Promise<void>): Promise<void> {
  const cluster = await privateCluster();
  if (!cluster) return expect.unreachable('privateCluster needs the machine’s PostgreSQL binaries');
  try {
    await sql(cluster.url, 'CREATE DATABASE a');
    await sql(cluster.url, 'CREATE DATABASE b');
    await test(cluster, (name) => cluster.url.replace(/\/postgres$/, `/${name}`));
  } finally {
    cluster.destroy();
  }
}

describePrivateCluster('PostgreSQL going away mid-run', () => {
  it('restarted while pages are in flight: the run waits it out, goes on, and ends as an uninterrupted run', () =>
    withCluster(async (cluster, db) => {
      // The reference: the same plan, uninterrupted.
      await using reference = await simulator(SIM);
      using first = workdir();
      const plain = await runChild({ ...PLAN, baseUrl: reference.url, dir: first.dir, sinks: ['postgres', 'csv'], postgresUrl: db('a'), stateUrl: db('a') }).done;
      expect(plain.code).toBe(0);

      await using sim = await simulator(SIM);
      using dir = workdir();
      const gate = sim.park({ q: 'grinder' });
      const child = runChild({ ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['postgres', 'csv'], postgresUrl: db('b'), stateUrl: db('b') });
      await gate.reached(1);
      // Pages of other series have committed; the grinder pages wait in the simulator while the server goes down.
      cluster.stop();
      const paid = sim.stats().credits.main?.debited ?? 0;
      gate.release();
      // The held answer arrives with the server down: its commit fails, and is tried again until the server is back.
      await until(() => (sim.stats().credits.main?.debited ?? 0) > paid);
      cluster.start();
      const result = await child.done;
      expect(result.code, result.stderr).toBe(0);
      expect(result.summary?.status).toBe('completed');
      expect(await stableRows(db('b'))).toEqual(await stableRows(db('a')));
      expect(sim.stats().credits.main?.debited).toBe(reference.stats().credits.main?.debited);
    }));

  it('gone for longer than WEBDATA_POSTGRES_RETRY_MS: the run stops (nothing lost), and the same command resumes to the same rows', () =>
    withCluster(async (cluster, db) => {
      await using reference = await simulator(SIM);
      using first = workdir();
      expect((await runChild({ ...PLAN, baseUrl: reference.url, dir: first.dir, sinks: ['postgres'], postgresUrl: db('a'), stateUrl: db('a') }).done).code).toBe(0);

      await using sim = await simulator(SIM);
      using dir = workdir();
      const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['postgres'], postgresUrl: db('b'), stateUrl: db('b') };
      const gate = sim.park({ q: 'grinder' });
      const child = runChild(spec, { WEBDATA_POSTGRES_RETRY_MS: '1500' });
      await gate.reached(1);
      cluster.stop();
      gate.release();
      const stopped = await child.done;
      expect(stopped.code).toBe(1);
      expect(stopped.stderr).toMatch(/OutputError: .*cannot be reached.*run the same command again/);
      cluster.start();
      const resumed = await runChild(spec).done;
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(await stableRows(db('b'))).toEqual(await stableRows(db('a')));
      // Paid twice at most the pages answered but not committed when it stopped: those in flight, and the one whose
      // commit was being retried.
      expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual((reference.stats().credits.main?.debited ?? 0) + PLAN.concurrency + 1);
    }));
});
