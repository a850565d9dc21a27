// How a run's jobs are best inserted (issue 43, item 1): `planRun` alone (the queue made, one job per series inserted,
// the shared limits written) on a plan of `series` search series (queries × 40 countries), each variant of
// `PlanInserts` (jobs per statement × statements on their way at once) on a database of its own, the variants in
// turn `rounds` times (the same load for each). Figures: seconds per planning, each round.
// `node scripts/with-node.mjs test/bench/plan-inserts.ts [series] [rounds] [batch×inFlight …]`, e.g.
// `… plan-inserts.ts 1000000 2 1000x1 1000x2 250x4` (a throwaway cluster).
import pg from 'pg';
import { openBoss } from '../../src/distributed/boss.ts';
import { type PlanInserts, planRun } from '../../src/distributed/plan-run.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { searchPages } from '../../src/sources/search-pages.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { benchPostgres, freshDatabase } from './postgres.ts';
import { COUNTRIES } from './plan-scale-countries.ts';

const [seriesArg, roundsArg, ...variantArgs] = process.argv.slice(2);
const series = Number(seriesArg ?? 200_000);
const rounds = Number(roundsArg ?? 2);
const variants: PlanInserts[] = (variantArgs.length > 0 ? variantArgs : ['1000x1', '1000x2']).map((v) => {
  const [batch, inFlight] = v.split('x').map(Number);
  return { batch: batch ?? 1000, inFlight: inFlight ?? 1 };
});

async function planOnce(admin: string, inserts: PlanInserts): Promise<number> {
  const url = await freshDatabase(admin, 'bench_plan_inserts');
  const pool = new pg.Pool({ connectionString: url, max: 6 });
  try {
    const queries = Array.from({ length: Math.ceil(series / COUNTRIES.length) }, (_, i) => `q${i}`);
    const plan = searchPages({ queries, countries: COUNTRIES, maxPages: 1 }).plan();
    const store = await postgresStateStore(pool, postgresTarget(url), { schema: 'webdata', pipeline: 'p' });
    await store.startRun({ runId: 'run', pipeline: 'p', startedAt: new Date().toISOString(), fingerprint: 'f', plan: {}, budget: null });
    const boss = await openBoss(pool, 'webdata');
    const started = performance.now();
    await planRun(boss, store, { pipeline: 'p', runId: 'run', planningNumber: 1, series: plan.series(), budget: null, retryFailed: false, spentBefore: 0 }, inserts);
    const seconds = (performance.now() - started) / 1000;
    await boss.stop({ graceful: false, close: false });
    return Math.round(seconds * 10) / 10;
  } finally {
    await pool.end();
  }
}

const cluster = await benchPostgres();
if (!cluster) throw new Error('no PostgreSQL for the bench (install it, or set WEBDATA_BENCH_DATABASE_URL)');
try {
  const seconds: Record<string, number[]> = {};
  for (let round = 0; round < rounds; round += 1) {
    for (const inserts of variants) {
      const name = `${inserts.batch}x${inserts.inFlight}`;
      (seconds[name] ??= []).push(await planOnce(cluster.admin, inserts));
      process.stderr.write(`${name}: ${seconds[name]?.join(', ')} s\n`);
    }
  }
  console.log(JSON.stringify({ series, rounds, seconds }));
} finally {
  cluster.close();
}
