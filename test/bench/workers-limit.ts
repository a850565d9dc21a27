// (j) Workers of one run behind a shared limit they are not told (issue 43, items 6 and 7), measured as a user would:
// three worker processes of the test fixture's pipeline started together, timed from the first spawn to the last exit,
// behind nginx's `limit_req` at 10 r/s (burst 2, no Retry-After) over an unlimited simulator; 429s from nginx's own
// access log. Then the same pipeline again on the same state (a new run: what the first remembered of the limit,
// per key fingerprint in the state store), measured the same way. The reference: one process on the same plan.
// Alone: `node scripts/with-node.mjs test/bench/workers-limit.ts [repeats] [shared|alone|both|first]` (a throwaway cluster;
// `first`: the three workers' first run only, what (j)'s 429s are counted on);
// BENCH_DEBUG=1 prints each worker's rate changes, pauses and phase marks (WEBDATA_PHASES) with their time since the first spawn,
// and nginx's log as a timeline (what each 429 followed: docs/benchmarks.md, "The first run's 429s, counted by cause").
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchPostgres, freshDatabase, query } from './postgres.ts';
import { log } from './throughput.ts';
import { type NginxLimiter, startNginx } from './nginx.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { compileCacheDirectory } from '../../src/cli/compile-cache.ts';

const FIXTURE = resolve(import.meta.dirname, '../fixtures/run-pipeline.ts');
const KEY = `bench_${Date.now().toString(36)}_limit`;
const cacheDirectory = compileCacheDirectory(process.env);
const cached = cacheDirectory ? { NODE_COMPILE_CACHE: cacheDirectory } : {};
const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;

/** The issue's run: 180 pages (36 series of 5) at 30 r/s configured, concurrency 3 a worker, nginx at 10 r/s, burst 2. */
export const LIMIT_RUN = { series: 36, pagesPerSeries: 5, limit: 10, burst: 2, configured: 30, latencyMs: 200 } as const;

interface Exited {
  code: number | null;
  /** Ms from the first spawn to this worker's first request (its phase mark). */
  firstRequestMs: number | undefined;
  /** Epoch ms of the exit. */
  at: number;
  status: string | undefined;
  pages: number;
}

/** One worker process; BENCH_DEBUG: its rate changes, pauses and phase marks, with the ms since `t0` (epoch ms) they came at. */
function spawnWorker(spec: Record<string, unknown>, t0: number, label: string): Promise<Exited> {
  const child = spawn(process.execPath, [FIXTURE], { env: { ...process.env, ...cached, WEBDATA_API_KEY: KEY, WEBDATA_TEST_SPEC: JSON.stringify(spec), WEBDATA_PHASES: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let firstRequestMs: number | undefined;
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    const lines = stderr.split('\n');
    stderr = lines.pop() ?? '';
    if (lines.some((line) => line.startsWith('webdata-etl phase first-request '))) firstRequestMs ??= Date.now() - t0;
    if (!process.env.BENCH_DEBUG) return;
    for (const line of lines) if (/"type":"(adapt|pause|stop)"|ERROR|^webdata-etl phase /.test(line)) process.stderr.write(`${label} +${Date.now() - t0} ms ${line}\n`);
  });
  return new Promise((resolve, reject) => {
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stdout.trim().split('\n').at(-1);
      const summary = line ? (JSON.parse(line) as { status: string; worker?: { pages: number }; pages?: number }) : undefined;
      resolve({ code, firstRequestMs, at: Date.now(), status: summary?.status, pages: summary?.worker?.pages ?? summary?.pages ?? 0 });
    });
  });
}

/** One invocation of the pipeline by `workers` processes, spawn to the last exit, with what nginx logged meanwhile. */
async function invocation(nginx: NginxLimiter, spec: Record<string, unknown>, workers: number, label: string) {
  const load = loadavg()[0] ?? 0;
  const t0 = Date.now();
  const exits = await Promise.all(Array.from({ length: workers }, (_, i) => spawnWorker(spec, t0, `${label} w${i}`)));
  const end = Math.max(...exits.map((exit) => exit.at));
  const seconds = (end - t0) / 1000;
  // nginx logs a request when it ends: every one of this invocation ended between the first spawn and the last exit.
  const logged = (await nginx.entries()).filter((entry) => entry.at * 1000 >= t0 && entry.at * 1000 <= end);
  const accepted = logged.filter((entry) => entry.status === '200').length;
  const rejected = logged.filter((entry) => entry.status === '429').length;
  const perSecond = { accepted: [] as number[], rejected: [] as number[] };
  for (const entry of logged) {
    const second = Math.floor(entry.at - t0 / 1000);
    const into = entry.status === '200' ? perSecond.accepted : entry.status === '429' ? perSecond.rejected : undefined;
    if (into) for (let s = into.length; s <= second; s++) into[s] = 0;
    if (into) into[second] = (into[second] ?? 0) + 1;
  }
  const first = Math.min(...logged.map((entry) => entry.at * 1000));
  if (process.env.BENCH_DEBUG) process.stderr.write(`${label} nginx ${timeline(logged, t0)}\n`);
  return { seconds: round(seconds, 2), accepted, rejected, exitCodes: exits.map((exit) => exit.code), statuses: exits.map((exit) => exit.status), pagesByWorker: exits.map((exit) => exit.pages), firstRequestMs: exits.map((exit) => exit.firstRequestMs ?? null), firstAnswerMs: Math.round(first - t0), perSecond, loadBefore: round(load, 2) };
}

/**
 * nginx's log as a timeline (BENCH_DEBUG): the ms since `t0` each answer ended at, by 250 ms; `n` accepted, `xk` k 429s.
 * With the workers' rate changes beside it, what each 429 followed (a start, a raise) shows.
 */
function timeline(logged: { at: number; status: string }[], t0: number): string {
  const slices = new Map<number, { accepted: number; rejected: number }>();
  for (const entry of logged) {
    const slice = Math.floor((entry.at * 1000 - t0) / 250) * 250;
    const counts = slices.get(slice) ?? { accepted: 0, rejected: 0 };
    if (entry.status === '429') counts.rejected += 1;
    else counts.accepted += 1;
    slices.set(slice, counts);
  }
  return [...slices].toSorted(([a], [b]) => a - b).map(([at, { accepted, rejected }]) => `${at}:${accepted}${rejected > 0 ? `x${rejected}` : ''}`).join(' ');
}

/**
 * A pipeline run twice on one state behind one nginx (the same API, so that the second run finds what the first
 * remembered): `workers` processes each time. Achieved: the pages each run stored over its spawn-to-exit time, over the limit.
 */
export async function limitedTwice(admin: string, name: string, workers: number, concurrency: number, distributed: boolean, once = false) {
  const upstream = await startSimulator({ latencyMs: LIMIT_RUN.latencyMs, keys: [{ key: KEY, name: 'main' }] });
  const nginx = await startNginx({ upstreamPort: upstream.port, ratePerSecond: LIMIT_RUN.limit, burst: LIMIT_RUN.burst });
  const url = await freshDatabase(admin, name);
  const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-'));
  try {
    const queries = Array.from({ length: LIMIT_RUN.series }, (_, i) => `limit query ${i}`);
    // Distributed: the state in the sink's PostgreSQL database. One process: the state in a SQLite file (so not distributed).
    const state = distributed ? { sinks: ['postgres'], stateUrl: url } : { sinks: ['postgres', 'sqlite'] };
    const spec = { baseUrl: nginx.url, dir, name: 'bench-limit', postgresUrl: url, countries: ['us'], queries, maxPages: LIMIT_RUN.pagesPerSeries, concurrency, requestsPerSecond: LIMIT_RUN.configured, ...state };
    const runs = [];
    for (const which of once ? (['first'] as const) : (['first', 'second'] as const)) {
      const measured = await invocation(nginx, spec, workers, `${name} ${which}`);
      const [stored] = await query<{ pages: number }>(url, `SELECT COUNT(DISTINCT (query, country, page))::int AS pages FROM results WHERE run_id = (SELECT run_id FROM results GROUP BY run_id ORDER BY max(fetched_at) DESC LIMIT 1)`);
      const pages = stored?.pages ?? 0;
      runs.push({ run: which, pages, achievedOverLimit: round(pages / measured.seconds / LIMIT_RUN.limit), share429: round(measured.rejected / Math.max(measured.accepted + measured.rejected, 1), 4), ...measured });
    }
    const remembered = distributed ? await query<{ rate: number; above: number | null }>(url, `SELECT rate, above FROM webdata.key_limits`).catch(() => []) : [];
    return { workers, concurrency, first: runs[0], second: runs[1], remembered, debited: upstream.stats().credits.main?.debited ?? 0 };
  } finally {
    await nginx.close();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * (j) 3 workers of one run configured at 30 r/s each, concurrency 3, behind nginx at 10 r/s (burst 2) they are not
 * told, 180 pages, run twice on the same state; the reference: one process (concurrency 4) on the same plan, twice.
 */
export async function scenarioWorkersAboveLimit(admin: string, which: 'shared' | 'alone' | 'both' | 'first' = 'both') {
  const pages = LIMIT_RUN.series * LIMIT_RUN.pagesPerSeries;
  const once = which === 'first';
  const shared = which === 'alone' ? undefined : (log(`(j) distributed: 3 workers at ${LIMIT_RUN.configured} r/s, concurrency 3 each, nginx allows ${LIMIT_RUN.limit} r/s (burst ${LIMIT_RUN.burst}, no Retry-After), ${pages} pages, ${once ? 'the first run only' : 'twice on one state'}`), await limitedTwice(admin, 'bench_workers_limit', 3, 3, true, once));
  const alone = which === 'shared' || once ? undefined : (log('(j) reference: one process, concurrency 4, the same plan and limiter, twice'), await limitedTwice(admin, 'bench_workers_limit_alone', 1, 4, false));
  return { limiter: 'nginx limit_req (leaky bucket, nodelay)', ...LIMIT_RUN, plannedPages: pages, measured: 'pages stored / (first spawn → last exit) / limit; 429s from nginx\'s log', shared, oneProcessReference: alone };
}

if (import.meta.main) {
  const repeats = Number(process.argv[2] ?? 1);
  const which = (process.argv[3] ?? 'shared') as 'shared' | 'alone' | 'both' | 'first';
  const postgres = await benchPostgres();
  if (!postgres) throw new Error('no PostgreSQL binaries and no WEBDATA_BENCH_DATABASE_URL');
  try {
    for (let i = 0; i < repeats; i++) process.stdout.write(`${JSON.stringify(await scenarioWorkersAboveLimit(postgres.admin, which))}\n`);
  } finally {
    postgres.close();
  }
}
