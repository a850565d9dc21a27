// Distributed runs (issue 17): workers as child processes on one PostgreSQL, against the simulator. (i) workers that
// join at once: 1, 3 and 4 on one run, spawn to exit (issue 33, test/bench/joining.ts); (j) 3 workers configured
// together at 3× a limit they do not know (nginx in front), twice on one state (test/bench/workers-limit.ts); (k) a budget over 4 workers; (l) what the shared pacer and
// budget cost per request.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { migrate } from '../../src/state/postgres/schema.ts';
import { freshDatabase, query } from './postgres.ts';
import { log } from './throughput.ts';
import { scenarioJoining } from './joining.ts';

// (j), measured from the workers' spawn to their exit, twice on one state: test/bench/workers-limit.ts.
export { scenarioWorkersAboveLimit } from './workers-limit.ts';
import { sharedMeter } from '../../src/distributed/shared-meter.ts';
import { sharedPacer } from '../../src/distributed/shared-pacer.ts';
import { systemClock } from '../../src/schedule/clock.ts';
import { startSimulator, type SimulatorOptions } from '../../src/simulator/index.ts';

const FIXTURE = resolve(import.meta.dirname, '../fixtures/run-pipeline.ts');
const KEY = `bench_${Date.now().toString(36)}_distributed`;
const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;


/** One worker process (the test fixture's pipeline: search → normalize → dedupe → PostgreSQL, state beside it). */
function worker(spec: Record<string, unknown>): { stop(): void; done: Promise<{ code: number | null; summary: { status: string; worker?: { pages: number } } | undefined }> } {
  const child = spawn(process.execPath, [FIXTURE], { env: { ...process.env, WEBDATA_API_KEY: KEY, WEBDATA_TEST_SPEC: JSON.stringify(spec) }, stdio: ['ignore', 'pipe', process.env.BENCH_DEBUG ? 'inherit' : 'ignore'] });
  const done = new Promise<{ code: number | null; summary: { status: string; worker?: { pages: number } } | undefined }>((resolve, reject) => {
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stdout.trim().split('\n').at(-1);
      resolve({ code, summary: line ? (JSON.parse(line) as { status: string }) : undefined });
    });
  });
  return { stop: () => child.kill('SIGTERM'), done };
}

/** `workers` processes started together on one run; pages per second from the rows' fetch times (no start-up in it). */
export async function distributedRun(admin: string, name: string, workers: number, sim: SimulatorOptions, spec: Record<string, unknown>, windowSeconds?: number) {
  const simulator = await startSimulator({ ...sim, keys: sim.keys ?? [{ key: KEY, name: 'main' }] });
  const url = await freshDatabase(admin, name);
  const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-'));
  try {
    const full = { baseUrl: simulator.url, dir, name, sinks: ['postgres'], postgresUrl: url, stateUrl: url, countries: ['us'], ...spec };
    const started = Array.from({ length: workers }, () => worker(full));
    // A window (as the one-process rate scenarios have): the workers are stopped once the run's pages span it.
    if (windowSeconds !== undefined) void stopAfter(url, windowSeconds + 1, () => started.forEach((w) => w.stop()), Promise.all(started.map((w) => w.done)));
    const results = await Promise.all(started.map((w) => w.done));
    const [span] = await query<{ pages: number; seconds: number }>(
      url,
      `SELECT COUNT(DISTINCT (query, country, page))::int AS pages, extract(epoch FROM max(fetched_at) - min(fetched_at))::float8 AS seconds FROM results`,
    );
    // Pages fetched in each second of the run: the shape, start-up and tail included.
    const perSecond = await query<{ s: number; pages: number }>(
      url,
      `WITH p AS (SELECT DISTINCT query, country, page, fetched_at FROM results), t AS (SELECT min(fetched_at) AS t0 FROM p)
       SELECT floor(extract(epoch FROM fetched_at - t0))::int AS s, COUNT(*)::int AS pages FROM p, t GROUP BY 1 ORDER BY 1`,
    );
    const byStatus = simulator.stats().byStatus;
    return {
      workers,
      exitCodes: results.map((r) => r.code),
      statuses: results.map((r) => r.summary?.status),
      pagesByWorker: results.map((r) => r.summary?.worker?.pages ?? 0),
      pages: span?.pages ?? 0,
      seconds: round(span?.seconds ?? 0, 2),
      pagesPerSecond: round((span?.pages ?? 0) / Math.max(span?.seconds ?? 1, 0.001), 2),
      perSecond: perSecond.map((row) => row.pages),
      serverByStatus: byStatus,
      debited: simulator.stats().credits.main?.debited ?? 0,
    };
  } finally {
    await simulator.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Calls `stop` once the run's fetched pages span `seconds` (or never, if `over` settles first). */
async function stopAfter(url: string, seconds: number, stop: () => void, over: Promise<unknown>) {
  let ended = false;
  void over.then(() => (ended = true));
  while (!ended) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const [span] = await query<{ seconds: number | null }>(url, `SELECT extract(epoch FROM max(fetched_at) - min(fetched_at))::float8 AS seconds FROM results`).catch(() => [{ seconds: null }]);
    if ((span?.seconds ?? 0) >= seconds) return stop();
  }
}

/**
 * (i) Workers that join at once (issue 33): the 360 latency-bound pages (150 ms answers, concurrency 2 per
 * worker, no limit near) by 1, 3 and 4 workers started together, timed from spawn to the last exit (start-up and tail
 * included); speedups by that wall time, each worker's phases, and a worker joining a run at work (test/bench/joining.ts).
 */
export async function scenarioWorkersThroughput(admin: string, quick: boolean) {
  return scenarioJoining(admin, quick ? [1, 3] : [1, 3, 4]);
}

/** (k) A budget of 150 credits over 4 workers: spent exactly, never above (by the simulator's own debit). */
export async function scenarioWorkersBudget(admin: string) {
  const queries = Array.from({ length: 60 }, (_, i) => `budget query ${i}`);
  log('(k) distributed: a budget of 150 over 4 workers, 300 pages planned');
  const run = await distributedRun(admin, 'bench_workers_budget', 4, { latencyMs: 50 }, { queries, maxPages: 5, concurrency: 2, budget: 150 });
  return { budget: 150, ...run, exact: run.debited === 150 };
}

/** (l) What a request pays for the shared limits: one slot of the shared pacer, one reservation and its commit. */
export async function scenarioSharedLimitsOverhead(admin: string) {
  log('(l) distributed: the shared pacer and budget, per request (2,000 of each, one after another)');
  const url = await freshDatabase(admin, 'bench_shared_limits');
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await migrate(pool, 'webdata', 'bench');
    await pool.query(`INSERT INTO webdata.run_limits (run_id, planned, budget) VALUES ('bench', true, 1e9)`);
    await pool.query(`INSERT INTO webdata.workers (run_id, worker_id, host, pid) VALUES ('bench', 'w', 'bench', 0)`);
    const pacer = sharedPacer(pool, 'webdata', 'bench', { leads: () => false })(Number.POSITIVE_INFINITY, systemClock);
    const meter = sharedMeter(pool, 'webdata', 'bench', 'w');
    await meter.refresh();
    const n = 2000;
    const time = async (work: () => Promise<unknown>) => {
      const started = performance.now();
      for (let i = 0; i < n; i++) await work();
      return round((performance.now() - started) / n, 3);
    };
    const acquireMs = await time(() => pacer.acquire());
    const reserveMs = await time(() => Promise.resolve(meter.reserve(1)));
    const commitMs = await time(async () => {
      meter.commit({ weight: 1, path: '/searchengine/search', series: 's' });
      await meter.flush();
    });
    return { requests: n, msPerRequest: { pacerSlot: acquireMs, budgetReserve: reserveMs, budgetCommit: commitMs, total: round(acquireMs + reserveMs + commitMs) } };
  } finally {
    await pool.end();
  }
}
