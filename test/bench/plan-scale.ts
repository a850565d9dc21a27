// Planning at scale (issue 43, item 1): `workers` processes started together on a plan of `series` series (queries
// × 40 countries, one page each) with a budget far below it: the planner's time to plan (`boss-started` → `planned`),
// each worker's first request (from its spawn), and each worker's peak resident memory (VmHWM, read from /proc while
// it runs). Run it under `nice` on a shared machine:
// `node scripts/with-node.mjs test/bench/plan-scale.ts [series] [workers] [budget]` (a throwaway cluster).
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchPostgres, freshDatabase, query } from './postgres.ts';
import { KEY, spawnWorker } from './joining.ts';
import { startSimulator } from '../../src/simulator/index.ts';

const [series = 200_000, workers = 8, budget = 2_000] = process.argv.slice(2).map(Number);
const COUNTRIES = ['us', 'gb', 'de', 'fr', 'it', 'es', 'nl', 'se', 'pl', 'ca', 'au', 'br', 'mx', 'ar', 'jp', 'kr', 'in', 'id', 'tr', 'za', 'ch', 'at', 'be', 'dk', 'fi', 'no', 'ie', 'pt', 'cz', 'hu', 'ro', 'gr', 'nz', 'sg', 'my', 'ph', 'th', 'vn', 'cl', 'co'];
const pg = await benchPostgres();
if (!pg) throw new Error('no PostgreSQL for the bench (install it, or set WEBDATA_BENCH_DATABASE_URL)');
const simulator = await startSimulator({ latencyMs: 50, keys: [{ key: KEY, name: 'main' }] });
const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-'));

/** The highest VmHWM (peak resident set, MB) read from the process's /proc while it lives. */
function peakRss(pid: number | undefined): () => number {
  let peak = 0;
  const timer = setInterval(() => {
    try {
      const kb = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
      if (kb) peak = Math.max(peak, Number(kb) / 1024);
    } catch {
      // Exited.
    }
  }, 100);
  return () => {
    clearInterval(timer);
    return Math.round(peak);
  };
}

try {
  const url = await freshDatabase(pg.admin, 'bench_plan_scale');
  const queryCount = Math.ceil(series / COUNTRIES.length);
  const spec = { baseUrl: simulator.url, dir, name: 'bench-plan-scale', sinks: ['postgres'], postgresUrl: url, stateUrl: url, countries: COUNTRIES, queries: [], queryCount, maxPages: 1, concurrency: 4, budget };
  const t0 = performance.now();
  const started = Array.from({ length: workers }, () => spawnWorker(spec, t0));
  const peaks = started.map((w) => peakRss(w.pid));
  const results = await Promise.all(started.map((w) => w.done));
  const rss = peaks.map((stop) => stop());
  const phases = await Promise.all(started.map((w) => w.phases));
  const planner = phases.find((p) => p.planned !== undefined);
  // The queue's jobs by state at the end: a job cancelled would be a series this run's workers did not know.
  const jobs = await query<{ state: string; n: string }>(url, `SELECT state, count(*) AS n FROM webdata_jobs.job GROUP BY state`);
  const s = (ms: number | undefined) => (ms === undefined ? null : Math.round(ms / 100) / 10);
  console.log(JSON.stringify({
    series: queryCount * COUNTRIES.length,
    workers,
    budget,
    codes: results.map((r) => r.code),
    planS: s(planner && (planner.planned ?? 0) - (planner['boss-started'] ?? 0)),
    plannedAtS: s(planner?.planned),
    registeredS: phases.map((p) => s(p['worker-registered'])),
    firstRequestS: phases.map((p) => s(p['first-request'])),
    peakRssMb: rss,
    pages: results.map((r) => r.summary?.worker?.pages ?? null),
    statuses: results.map((r) => r.summary?.status),
    jobs: Object.fromEntries(jobs.map((row) => [row.state, Number(row.n)])),
    wallS: s(Math.max(...results.map((r) => r.atMs))),
  }));
} finally {
  await simulator.close();
  rmSync(dir, { recursive: true, force: true });
  pg.close();
}
