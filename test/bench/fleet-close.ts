// The fleet's close (issue 43, item 8): eight workers on a plan of `series` series with a budget far below it, each
// timed from its `closing` phase mark to `leaving` (the run's end recorded, the outcomes with it), and the rows the
// closes wrote to the outcomes table (pg_stat_user_tables: inserted + updated). Run it under `nice` on a shared
// machine: `node scripts/with-node.mjs test/bench/fleet-close.ts [series] [workers] [budget]`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchPostgres, freshDatabase, query } from './postgres.ts';
import { KEY, spawnWorker } from './joining.ts';
import { startSimulator } from '../../src/simulator/index.ts';

const [series = 200_000, workers = 8, budget = 4_000] = process.argv.slice(2).map(Number);
// 40 countries: the queries go to the workers in an environment variable, which holds 128 kB at most.
const COUNTRIES = ['us', 'gb', 'de', 'fr', 'it', 'es', 'nl', 'se', 'pl', 'ca', 'au', 'br', 'mx', 'ar', 'jp', 'kr', 'in', 'id', 'tr', 'za', 'ch', 'at', 'be', 'dk', 'fi', 'no', 'ie', 'pt', 'cz', 'hu', 'ro', 'gr', 'nz', 'sg', 'my', 'ph', 'th', 'vn', 'cl', 'co'];
const pg = await benchPostgres();
if (!pg) throw new Error('no PostgreSQL for the bench (install it, or set WEBDATA_BENCH_DATABASE_URL)');
const simulator = await startSimulator({ latencyMs: 50, keys: [{ key: KEY, name: 'main' }] });
const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-'));
try {
  const url = await freshDatabase(pg.admin, 'bench_fleet_close');
  const queries = Array.from({ length: Math.ceil(series / COUNTRIES.length) }, (_, i) => `q${i}`);
  const spec = { baseUrl: simulator.url, dir, name: 'bench-fleet-close', sinks: ['postgres'], postgresUrl: url, stateUrl: url, countries: COUNTRIES, queries, maxPages: 2, concurrency: 4, budget };
  const t0 = performance.now();
  const started = Array.from({ length: workers }, () => spawnWorker(spec, t0));
  const results = await Promise.all(started.map((w) => w.done));
  const phases = await Promise.all(started.map((w) => w.phases));
  const closes = phases.map((p) => Math.round((p.leaving ?? Number.NaN) - (p.closing ?? Number.NaN)));
  // Of which recording the outcomes (and tracked ranks): `outcomes` → `outcomes-recorded` (none: the worker left the record to others).
  const recording = phases.map((p) => Math.round((p['outcomes-recorded'] ?? Number.NaN) - (p.outcomes ?? Number.NaN)));
  // The statistics of the workers' sessions reach the server's as they end: asked once every worker has exited.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const [written] = await query<{ ins: string; upd: string }>(url, `SELECT n_tup_ins AS ins, n_tup_upd AS upd FROM pg_stat_user_tables WHERE relname = 'results_outcomes'`);
  console.log(JSON.stringify({ series: queries.length * COUNTRIES.length, workers, budget, codes: results.map((r) => r.code), statuses: results.map((r) => r.summary?.status), wallS: Math.round(Math.max(...results.map((r) => r.atMs)) / 100) / 10, closeMs: closes, outcomesMs: recording, outcomeRows: { inserted: Number(written?.ins), updated: Number(written?.upd) } }));
} finally {
  await simulator.close();
  rmSync(dir, { recursive: true, force: true });
  pg.close();
}
