// What a worker joining a run pays to open the state store and the views on a database a first run has set up (the
// schema migrated, the views made), each time on a pool of its own as a new process would: the store's opening
// (`migrate`), the spend views and the results' views, `together` at once. Median and range of `rounds` openings, in ms
// of wall time. `node scripts/with-node.mjs test/bench/joiner-open.ts [rounds] [together]` (a throwaway cluster; run the same file in another
// checkout for a before/after pair). docs/benchmarks.md, "A worker's start-up".
import pg from 'pg';
import { createPostgresResultsViews, createPostgresSpendView } from '../../src/analytics/postgres-views.ts';
import { normalize, run, searchPages, toPostgres } from '../../src/index.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { benchPostgres, freshDatabase } from './postgres.ts';

const rounds = Number(process.argv[2] ?? 20);
const together = Number(process.argv[3] ?? 3);
const postgres = await benchPostgres();
if (!postgres) throw new Error('no PostgreSQL binaries and no WEBDATA_BENCH_DATABASE_URL');
const sim = await startSimulator({ seed: 1 });
try {
  const url = await freshDatabase(postgres.admin, 'bench_joiner_open');
  const summary = await run(
    { name: 'joiner', source: searchPages({ queries: ['espresso', 'kettle'], countries: ['us'], maxPages: 1 }), stages: [normalize()], sinks: [toPostgres({ url, table: 'results' })], state: { url } },
    { baseUrl: sim.url, apiKey: sim.apiKey },
  );
  if (summary.status !== 'completed') throw new Error(`the first run ended ${summary.status}`);
  // `together` joiners open at once, each on a pool of its own (a fleet's workers start together): each step's time is
  // the slowest of them.
  const steps = { store: [] as number[], spendViews: [] as number[], resultsViews: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    const pools = Array.from({ length: together }, () => new pg.Pool({ connectionString: url, max: 4 }));
    await Promise.all(pools.map((pool) => pool.query('SELECT 1'))); // connected, as a worker's pool is by then
    const timed = async (step: (pool: pg.Pool) => Promise<unknown>) => {
      const at = performance.now();
      const each = await Promise.all(pools.map(async (pool) => (await step(pool), performance.now() - at)));
      return Math.max(...each);
    };
    steps.store.push(await timed((pool) => postgresStateStore(pool, postgresTarget(url), { schema: 'webdata', pipeline: 'joiner' })));
    steps.spendViews.push(await timed((pool) => createPostgresSpendView(pool, 'webdata')));
    steps.resultsViews.push(await timed((pool) => createPostgresResultsViews(pool, 'public', 'results', ['rankings', 'domains', 'overlap', 'changes'])));
    await Promise.all(pools.map((pool) => pool.end()));
  }
  const figure = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return { median: Number((sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(2)), min: Number((sorted[0] ?? 0).toFixed(2)), max: Number((sorted.at(-1) ?? 0).toFixed(2)) };
  };
  process.stdout.write(`${JSON.stringify({ rounds, together, store: figure(steps.store), spendViews: figure(steps.spendViews), resultsViews: figure(steps.resultsViews) })}\n`);
} finally {
  await sim.close();
  postgres.close();
}
