// Planning at scale (issue 43, item 1): `workers` processes started together on a plan of `series` series (queries
// × 40 countries, one page each) with a budget far below it: the planner's time to plan (`boss-started` → `planned`),
// each worker's first request (from its spawn), each worker's peak resident memory (VmHWM, read from /proc while it
// runs: over its life, and as it was at its first request, before the run's close), and how each left (exit code,
// signal, the last lines of its stderr). Run it under `nice` on a shared machine:
// `node scripts/with-node.mjs test/bench/plan-scale.ts [series] [workers] [budget]` (a throwaway cluster), or
// `npm run -s bench -- --scale` (1,000,000 and 200,000 series, 8 workers, with test/bench/feed-window.ts).
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchPostgres, freshDatabase, query } from './postgres.ts';
import { KEY, spawnWorker } from './joining.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { COUNTRIES } from './plan-scale-countries.ts';

/** VmHWM (peak resident set, MB) read from the process's /proc every 100 ms while it lives: `now()` the peak so far. */
function peakRss(pid: number | undefined): { now(): number; stop(): number } {
  let peak = 0;
  const read = () => {
    try {
      const kb = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
      if (kb) peak = Math.max(peak, Number(kb) / 1024);
    } catch {
      // Exited.
    }
  };
  const timer = setInterval(read, 100);
  return {
    now: () => {
      read();
      return Math.round(peak);
    },
    stop: () => {
      clearInterval(timer);
      return Math.round(peak);
    },
  };
}

/** One fleet on a plan of `series` series; `admin` a cluster's administrator URL (the database is made anew). */
export async function scenarioPlanScale(admin: string, series: number, workers = 8, budget = 2_000) {
  const simulator = await startSimulator({ latencyMs: 50, keys: [{ key: KEY, name: 'main' }] });
  const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-'));
  try {
    const url = await freshDatabase(admin, 'bench_plan_scale');
    const queryCount = Math.ceil(series / COUNTRIES.length);
    const spec = { baseUrl: simulator.url, dir, name: 'bench-plan-scale', sinks: ['postgres'], postgresUrl: url, stateUrl: url, countries: COUNTRIES, queries: [], queryCount, maxPages: 1, concurrency: 4, budget };
    // BENCH_HEAP_SNAPSHOT=<dir>: each worker writes a heap snapshot there 2 s after its first request (what its heap
    // holds then: `--heapsnapshot-signal`), to trace what grows with the plan.
    const snapshots = process.env.BENCH_HEAP_SNAPSHOT;
    const options = process.env.NODE_OPTIONS;
    if (snapshots) process.env.NODE_OPTIONS = `${options ?? ''} --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${snapshots}`.trim();
    const t0 = performance.now();
    const started = Array.from({ length: workers }, () => spawnWorker(spec, t0));
    if (snapshots) {
      if (options === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = options;
    }
    const peaks = started.map((w) => peakRss(w.pid));
    // The peak as it stood at each worker's first request: its start's, the run's close not in it yet.
    const atFirstRequest = started.map((w, i) => w.reached('first-request').then(() => peaks[i]?.now() ?? 0));
    if (snapshots) {
      for (const w of started) void w.reached('first-request').then(() => setTimeout(() => w.pid && process.kill(w.pid, 'SIGUSR2'), 2_000));
    }
    const results = await Promise.all(started.map((w) => w.done));
    const rss = peaks.map((peak) => peak.stop());
    // A worker that never sent a request: null (an already settled peak wins the race, being first).
    const startRss = await Promise.all(atFirstRequest.map((peak) => Promise.race([peak, Promise.resolve(null)])));
    const phases = await Promise.all(started.map((w) => w.phases));
    const planner = phases.find((p) => p.planned !== undefined);
    // The queue's jobs by state at the end: a job cancelled would be a series this run's workers did not know.
    const jobs = await query<{ state: string; n: string }>(url, `SELECT state, count(*) AS n FROM webdata_jobs.job GROUP BY state`);
    const s = (ms: number | undefined) => (ms === undefined ? null : Math.round(ms / 100) / 10);
    const plannedAtS = s(planner?.planned);
    const firstRequestS = phases.map((p) => s(p['first-request']));
    return {
      series: queryCount * COUNTRIES.length,
      workers,
      budget,
      codes: results.map((r) => r.code),
      signals: results.map((r) => r.signal),
      planS: s(planner && (planner.planned ?? 0) - (planner['boss-started'] ?? 0)),
      plannedAtS,
      registeredS: phases.map((p) => s(p['worker-registered'])),
      firstRequestS,
      // The last first request after the plan's end (the aim: within a second).
      lastFirstRequestAfterPlanS: plannedAtS === null || firstRequestS.some((t) => t === null) ? null : Math.round((Math.max(...(firstRequestS as number[])) - plannedAtS) * 10) / 10,
      peakRssAtFirstRequestMb: startRss,
      peakRssMb: rss,
      pages: results.map((r) => r.summary?.worker?.pages ?? null),
      statuses: results.map((r) => r.summary?.status),
      jobs: Object.fromEntries(jobs.map((row) => [row.state, Number(row.n)])),
      exitS: results.map((r) => s(r.atMs)),
      wallS: s(Math.max(...results.map((r) => r.atMs))),
      stderrTails: results.map((r) => r.stderrTail),
    };
  } finally {
    await simulator.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const [series = 200_000, workers = 8, budget = 2_000] = process.argv.slice(2).map(Number);
  const pg = await benchPostgres();
  if (!pg) throw new Error('no PostgreSQL for the bench (install it, or set WEBDATA_BENCH_DATABASE_URL)');
  try {
    console.log(JSON.stringify(await scenarioPlanScale(pg.admin, series, workers, budget)));
  } finally {
    pg.close();
  }
}
