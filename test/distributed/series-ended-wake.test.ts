import pg from 'pg';
import { expect, it } from 'vitest';
import { openBoss } from '../../src/distributed/boss.ts';
import { planRun } from '../../src/distributed/plan-run.ts';
import { seriesEndedChannel } from '../../src/distributed/series-queue.ts';
import { RunWorker } from '../../src/distributed/worker.ts';
import type { Series } from '../../src/pipeline/page.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';

// The run's end, heard at once (src/distributed/series-queue.ts): a worker with nothing left to take waits for the
// run's last series, held by others. A series that ends while its worker had nothing to take is told on the run's
// channel at its commit, and a worker that hears it asks again then, not at its next poll. Only then: a series that
// ends while the queue still has work says nothing (a NOTIFY in every series' commit would serialize them).

const RUN = 'run-wake';
const series = (query: string): Series => ({ id: `search|${query}|us|`, endpoint: 'search', query, country: 'us', lang: '' });

/** Notifications on `channel`, as a separate session hears them, in commit order. */
async function listen(url: string, channel: string): Promise<{ heard: string[]; until(payload: string): Promise<void>; end(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const heard: string[] = [];
  const waiting: [string, () => void][] = [];
  client.on('notification', (message) => {
    heard.push(message.payload ?? '');
    for (const [payload, resolve] of waiting) if (payload === message.payload) resolve();
  });
  await client.query(`LISTEN "${channel}"`);
  return {
    heard,
    until: (payload) => new Promise<void>((resolve) => (heard.includes(payload) ? resolve() : waiting.push([payload, resolve]))),
    end: () => client.end(),
  };
}

describePostgres('a series ending near the run\'s end wakes the workers waiting for it', () => {
  it('told on the run\'s channel at its commit only while its worker had nothing to take; a worker hears it', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 6 });
    const channel = seriesEndedChannel('webdata', RUN);
    const listener = await listen(db.url, channel);
    let worker: RunWorker | undefined;
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      await store.startRun({ runId: RUN, pipeline: 'p', startedAt: new Date().toISOString(), fingerprint: 'f', plan: {}, budget: null });
      const boss = await openBoss(pool, 'webdata');
      const plan = [series('alpha'), series('beta')];
      const queue = await planRun(boss, store, { pipeline: 'p', runId: RUN, planningNumber: 1, series: plan, budget: null, retryFailed: false, spentBefore: 0 });
      worker = await RunWorker.start({ store, boss, runId: RUN, queue, planningNumber: 1, seriesTotal: plan.length, weights: {} });
      const feed = worker.queue.feed(plan[Symbol.iterator]());
      // A series' job completed in a transaction of its own, as the page that ends the series completes it.
      const finish = async (id: string) => {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          expect(await worker?.queue.finish(id, client)).toBe(true);
          await client.query('COMMIT');
        } finally {
          client.release();
        }
      };

      const first = await feed.next();
      const second = await feed.next();
      expect([first.value?.id, second.value?.id].sort()).toEqual(plan.map((s) => s.id).sort());
      // The queue had work at the last ask: ending a series says nothing. (Notifications come in commit order, so
      // the marker sent after it is the first thing heard.)
      await finish(first.value?.id ?? '');
      await pool.query(`SELECT pg_notify($1, 'marker')`, [channel]);
      await listener.until('marker');
      expect(listener.heard).toEqual(['marker']);

      // Asked for a third series, the worker finds none and waits (the run is not over: the second is not ended).
      const third = feed.next();
      while (!worker.queue.waiting) await new Promise((resolve) => setTimeout(resolve, 10));
      // The worker's own session hears it too, and wakes its queue (as every worker's does).
      const { queue: seriesQueue } = worker;
      const wake = seriesQueue.wake.bind(seriesQueue);
      const woken = new Promise<void>((resolve) => {
        seriesQueue.wake = () => {
          wake();
          resolve();
        };
      });
      await finish(second.value?.id ?? '');
      await listener.until('');
      expect(listener.heard).toEqual(['marker', '']);
      await woken;

      // The worker leaves: its wait ends with the feed (nothing else to take).
      await worker.leave('finished');
      worker = undefined;
      expect(await third).toEqual({ done: true, value: undefined });
    } finally {
      await worker?.leave('failed');
      await listener.end();
      await pool.end();
      await db.drop();
    }
  });
});
