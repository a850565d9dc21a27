import { expect, it } from 'vitest';
import { simulator, until } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import type { Cluster } from './pg-cluster.ts';
import { describePrivateCluster, privateCluster, sql } from './pg.ts';
import { runChild } from '../run/resume-helpers.ts';

/** Polls `probe` until it holds (the test's own timeout bounds the wait). */
async function untilQueried(probe: () => Promise<boolean>): Promise<void> {
  while (!(await probe())) await new Promise((resolve) => setTimeout(resolve, 100));
}

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

/** The same plan, uninterrupted, into database `a`: what a test's run is compared with. Resolves to what it was debited. */
async function referenceRun(db: (name: 'a' | 'b') => string, sinks: string[]): Promise<number> {
  await using reference = await simulator(SIM);
  using first = workdir();
  const plain = await runChild({ ...PLAN, baseUrl: reference.url, dir: first.dir, sinks, postgresUrl: db('a'), stateUrl: db('a') }).done;
  expect(plain.code).toBe(0);
  return reference.stats().credits.main?.debited ?? 0;
}

describePrivateCluster('PostgreSQL going away mid-run', () => {
  it('restarted while pages are in flight: the run waits it out, goes on, and ends as an uninterrupted run', () =>
    withCluster(async (cluster, db) => {
      const referenceDebited = await referenceRun(db, ['postgres', 'csv']);

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
      expect(sim.stats().credits.main?.debited).toBe(referenceDebited);
    }));

  it('gone for longer than WEBDATA_POSTGRES_RETRY_MS: the run stops (nothing lost), and the same command resumes to the same rows', () =>
    withCluster(async (cluster, db) => {
      const referenceDebited = await referenceRun(db, ['postgres']);

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
      expect(stopped.stderr).toMatch(/OutputError: .*cannot be reached.*: committed data is intact; run the same command again/);
      cluster.start();
      const resumed = await runChild(spec).done;
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(await stableRows(db('b'))).toEqual(await stableRows(db('a')));
      // Paid twice at most the pages answered but not committed when it stopped: those in flight, and the one whose
      // commit was being retried.
      expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(referenceDebited + PLAN.concurrency + 1);
    }));

  it('restarted while a worker has not reconnected yet: a worker starting then joins its run (not planning it again, nor taking it for dead), and the first goes on in it', () =>
    withCluster(async (cluster, db) => {
      const referenceDebited = await referenceRun(db, ['postgres']);

      await using sim = await simulator(SIM);
      using dir = workdir();
      const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['postgres'], postgresUrl: db('b'), stateUrl: db('b') };
      const gate = sim.park();
      const worker = runChild(spec);
      const children = [worker];
      try {
        await worker.whileRunning(gate.reached(1));
        // Frozen, it cannot take its liveness lock back when the server is back: a worker that has not reconnected yet.
        worker.child.kill('SIGSTOP');
        cluster.stop();
        cluster.start();
        // An outage as long as the stale limit: its last beat is 40 s old when the server is back.
        await sql(db('b'), `UPDATE webdata.workers SET heartbeat_at = heartbeat_at - interval '40 seconds'`);
        const joiner = runChild(spec);
        children.push(joiner);
        await joiner.printed('"type":"start"');
        expect(joiner.stderr()).toContain('"joined":true');
        // Two beats of the joiner (the first one's sweep of dead workers done) before the first worker comes back.
        await untilQueried(async () => (await sql(db('b'), `SELECT 1 FROM webdata.workers WHERE pid = $1 AND heartbeat_at > started_at + interval '4 seconds'`, [joiner.child.pid])).length > 0);
        worker.child.kill('SIGCONT');
        gate.release();
        const results = await Promise.all([worker.done, joiner.done]);
        for (const result of results) {
          expect(result.code, result.stderr).toBe(0);
          expect(result.summary?.status).toBe('completed');
        }
        expect(results[1]?.summary?.runId).toBe(results[0]?.summary?.runId);
        expect(await sql(db('b'), 'SELECT status FROM webdata.workers')).toEqual([{ status: 'completed' }, { status: 'completed' }]);
        expect(await stableRows(db('b'))).toEqual(await stableRows(db('a')));
        // Paid twice at most what the frozen worker had in flight (its series may have gone to the other meanwhile).
        expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(referenceDebited + PLAN.concurrency);
      } finally {
        for (const child of children) {
          child.child.kill('SIGCONT');
          child.child.kill('SIGKILL');
        }
      }
    }));
});
