import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pg from 'pg';
import { expect, it } from 'vitest';
import { openBoss } from '../../src/distributed/boss.ts';
import { planRun } from '../../src/distributed/plan-run.ts';
import { WINDOW } from '../../src/distributed/plan-window.ts';
import { RunWorker } from '../../src/distributed/worker.ts';
import type { Series } from '../../src/pipeline/page.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';

// Planning at scale (issue 43, item 1; src/distributed/series-queue.ts): a worker's feed reads the plan only as far as
// the jobs it fetches need. Before, it read the whole plan into a map, in one synchronous pass, before its first
// series (3.4 s and 269 MB of heap at a million series, every worker, its heartbeat waiting behind it).

const RUN = 'run-lazy';
const SERIES = 20_000;

function* plan(read: { count: number }, count = SERIES): Generator<Series> {
  for (let i = 0; i < count; i += 1) {
    read.count += 1;
    const query = `q${i}`;
    yield { id: `search|${query}|us|`, endpoint: 'search', query, country: 'us', lang: '' };
  }
}

describePostgres('a worker\'s feed over a large plan', () => {
  it('hands its first series having read a slice of the plan, not the whole of it; the series are the plan\'s, once each', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 6 });
    let worker: RunWorker | undefined;
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      await store.startRun({ runId: RUN, pipeline: 'p', startedAt: new Date().toISOString(), fingerprint: 'f', plan: {}, budget: null });
      const boss = await openBoss(pool, 'webdata');
      const queue = await planRun(boss, store, { pipeline: 'p', runId: RUN, planningNumber: 1, series: plan({ count: 0 }), budget: null, retryFailed: false, spentBefore: 0 });
      worker = await RunWorker.start({ store, boss, runId: RUN, queue, planningNumber: 1, seriesTotal: SERIES, weights: {} });
      const read = { count: 0 };
      const feed = worker.queue.feed(plan(read));
      // Nothing is read before a series is asked for.
      expect(read.count).toBe(0);
      const handed = new Set<string>();
      for (let i = 0; i < 20; i += 1) {
        const next = await feed.next();
        expect(next.done).toBe(false);
        expect(next.value?.id).toMatch(/^search\|q\d+\|us\|$/);
        handed.add(next.value?.id ?? '');
      }
      expect(handed.size).toBe(20);
      // The jobs are inserted a thousand to a statement in the plan's order, and fetched about in that order (the
      // order of their insertion, a statement's jobs in any order among themselves): the first twenty are found in
      // the first statements' series. Before, this read all 20,000 at the first `next`.
      expect(read.count).toBeLessThanOrEqual(3_000);
      // Handed back, the series come back to the queue, and to this worker: known again (in the feed's window), none
      // taken for a job of something else and cancelled.
      await worker.queue.handBackAll();
      // Jobs planned in one statement are fetched in any order among themselves: a handed-back one is back within the
      // first statement's 1,000 (2,000, should two statements share a timestamp).
      let back = 0;
      for (let i = 0; i < 2_000 && back === 0; i += 1) {
        const next = await feed.next();
        expect(next.done).toBe(false);
        if (handed.has(next.value?.id ?? '')) back += 1;
      }
      expect(back).toBe(1);
      const cancelled = await pool.query(`SELECT count(*)::int AS n FROM webdata_jobs.job WHERE state = 'cancelled'`);
      expect(cancelled.rows[0]).toEqual({ n: 0 });
      await worker.queue.handBackAll();
    } finally {
      await worker?.leave('failed');
      await pool.end();
      await db.drop();
    }
  });

  it('keeps a bounded window of the plan however far it reads past, and still finds a series handed back late', async () => {
    // Other workers take most of a plan of 30,000 series while this one holds one: its feed reads past them all to
    // its next job. Before, every series read stayed (30,000 of them, here 2 KB each: 60 MB); now a window of them.
    const total = 30_000;
    const others = 26_000;
    const padding = 'x'.repeat(2_000);
    // Every series object the plan gives out, weakly: after a full collection, those alive are those the feed holds.
    const given: WeakRef<Series>[] = [];
    function* padded(): Generator<Series> {
      for (let i = 0; i < total; i += 1) {
        const query = `q${i}`;
        const series: Series = { id: `search|${query}|us|`, endpoint: 'search', query, country: 'us', lang: '', tags: { note: `${i}${padding}` } };
        given.push(new WeakRef(series));
        yield series;
      }
    }
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const alive = () => {
      gc();
      return given.filter((ref) => ref.deref() !== undefined).length;
    };
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 6 });
    let worker: RunWorker | undefined;
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      await store.startRun({ runId: RUN, pipeline: 'p', startedAt: new Date().toISOString(), fingerprint: 'f', plan: {}, budget: null });
      const boss = await openBoss(pool, 'webdata');
      const queue = await planRun(boss, store, { pipeline: 'p', runId: RUN, planningNumber: 1, series: plan({ count: 0 }, total), budget: null, retryFailed: false, spentBefore: 0 });
      worker = await RunWorker.start({ store, boss, runId: RUN, queue, planningNumber: 1, seriesTotal: total, weights: {} });
      const feed = worker.queue.feed(padded(), padded);
      const first = await feed.next();
      expect(first.done).toBe(false);
      const held = first.value?.id ?? '';
      // The other workers take and finish 26,000 series.
      for (let taken = 0; taken < others; ) {
        const jobs = await boss.fetch(queue, { batchSize: 1_000 });
        expect(jobs.length).toBeGreaterThan(0);
        await boss.complete(queue, jobs.map((job) => ({ id: job.id, retryCount: job.retryCount })));
        taken += jobs.length;
      }
      // A worker fetches a few jobs a statement (FETCHED_AT_ONCE in series-queue.ts): those it holds come first, then
      // the next past what the others took.
      // (The plan's inserts go two statements at once, so the queue's order is the plan's only to a batch or two.)
      let next = await feed.next();
      for (let asked = 1; !next.done && given.length <= 2 * WINDOW && asked < 4; asked += 1) next = await feed.next();
      expect(next.done).toBe(false);
      expect(given.length).toBeGreaterThan(2 * WINDOW);
      // What the feed holds is its window (and the series it was handed), not what it read: before, all of it.
      expect(alive()).toBeLessThanOrEqual(WINDOW + 10);
      // The series it took first, handed back, comes back to the queue's head: found by reading the plan again.
      await worker.queue.handBack(held);
      // (After the series this worker fetched with its last job, at once.)
      let back = await feed.next();
      for (let asked = 1; !back.done && back.value.id !== held && asked < 4; asked += 1) back = await feed.next();
      expect(back.done).toBe(false);
      expect(back.value?.id).toBe(held);
      expect(back.value?.query).toBe(first.value?.query);
      const cancelled = await pool.query(`SELECT count(*)::int AS n FROM webdata_jobs.job WHERE state = 'cancelled'`);
      expect(cancelled.rows[0]).toEqual({ n: 0 });
      await worker.queue.handBackAll();
    } finally {
      await worker?.leave('failed');
      await pool.end();
      await db.drop();
    }
  });
});
