// A worker's feed over a large plan (issue 43, item 1): a plan of `series` search series (queries × 40 countries) in
// one database, one worker's feed holding one series while the others (played by this process: jobs fetched and
// completed a thousand at a time, as workers finish them) take all but the last `left`; then the worker's next series
// (it reads the plan past what the others took), and the series it held, handed back, found again. Figures: the
// heap the feed holds after a full collection (`heapMb`, against `baseHeapMb` before the plan was read), the time to
// its next series and to the one handed back. The same file runs against another checkout's src/ (a base from
// `git archive`, this file copied into it): it uses nothing newer than `queue.feed(all)`, whose second argument an
// older feed ignores.
// `node scripts/with-node.mjs test/bench/feed-window.ts [series] [left]` (a throwaway cluster); in
// `npm run -s bench -- --scale`.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pg from 'pg';
import { openBoss } from '../../src/distributed/boss.ts';
import { planRun } from '../../src/distributed/plan-run.ts';
import { RunWorker } from '../../src/distributed/worker.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { searchPages } from '../../src/sources/search-pages.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { benchPostgres, freshDatabase } from './postgres.ts';
import { COUNTRIES } from './plan-scale-countries.ts';

const s = (ms: number) => Math.round(ms / 10) / 100;

/** The feed of one worker over a plan of `series` series, all but `left` taken by others; `admin` a cluster's URL. */
export async function scenarioFeedWindow(admin: string, series = 200_000, left = 5_000) {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const heapMb = () => {
    gc();
    return Math.round(process.memoryUsage().heapUsed / 1e5) / 10;
  };
  const url = await freshDatabase(admin, 'bench_feed_window');
  const pool = new pg.Pool({ connectionString: url, max: 6 });
  let worker: RunWorker | undefined;
  try {
    const queries = Array.from({ length: Math.ceil(series / COUNTRIES.length) }, (_, i) => `q${i}`);
    const plan = searchPages({ queries, countries: COUNTRIES, maxPages: 1 }).plan();
    const runId = 'run-feed-window';
    const store = await postgresStateStore(pool, postgresTarget(url), { schema: 'webdata', pipeline: 'p' });
    await store.startRun({ runId, pipeline: 'p', startedAt: new Date().toISOString(), fingerprint: 'f', plan: {}, budget: null });
    const boss = await openBoss(pool, 'webdata');
    const queue = await planRun(boss, store, { pipeline: 'p', runId, planningNumber: 1, series: plan.series(), budget: null, retryFailed: false, spentBefore: 0 });
    worker = await RunWorker.start({ store, boss, runId, queue, planningNumber: 1, seriesTotal: plan.seriesCount, weights: {} });
    const baseHeapMb = heapMb();
    const feed = worker.queue.feed(plan.series()[Symbol.iterator](), () => plan.series()[Symbol.iterator]());
    const first = await feed.next();
    const held = first.value?.id ?? '';
    const othersStarted = performance.now();
    for (let taken = 1; taken < plan.seriesCount - left; ) {
      const jobs = await boss.fetch(queue, { batchSize: 1_000 });
      if (jobs.length === 0) break;
      await boss.complete(queue, jobs.map((job) => ({ id: job.id, retryCount: job.retryCount })));
      taken += jobs.length;
    }
    const othersS = s(performance.now() - othersStarted);
    let t = performance.now();
    const next = await feed.next();
    const nextS = s(performance.now() - t);
    const afterNextHeapMb = heapMb();
    await worker.queue.handBack(held);
    t = performance.now();
    const back = await feed.next();
    const backS = s(performance.now() - t);
    const figures = {
      series: plan.seriesCount,
      takenByOthers: plan.seriesCount - left,
      othersS,
      baseHeapMb,
      heapMb: afterNextHeapMb,
      heldMb: Math.round((afterNextHeapMb - baseHeapMb) * 10) / 10,
      nextS,
      nextFound: next.done === false,
      handedBackFound: back.value?.id === held,
      handedBackS: backS,
      rssMb: Math.round(process.memoryUsage().rss / 1e6),
    };
    await worker.queue.handBackAll();
    return figures;
  } finally {
    await worker?.leave('failed');
    await pool.end();
  }
}

if (import.meta.main) {
  const [series = 200_000, left = 5_000] = process.argv.slice(2).map(Number);
  const cluster = await benchPostgres();
  if (!cluster) throw new Error('no PostgreSQL for the bench (install it, or set WEBDATA_BENCH_DATABASE_URL)');
  try {
    console.log(JSON.stringify(await scenarioFeedWindow(cluster.admin, series, left)));
  } finally {
    cluster.close();
  }
}
