// Workers that join at once (issue 33, aim 2): the same latency-bound run by 1, 3 and 4 worker processes started
// together, timed from their spawn to the last one's exit (start-up and tail included, as a user waits), with each
// worker's phase marks (WEBDATA_PHASES=1, src/phase-marks.ts); and a worker joining a run already planned and at
// work, timed from its spawn to its registration and its first request.
// Alone: `node scripts/with-node.mjs test/bench/joining.ts [workers,…] [rounds] [nolate]` (a throwaway cluster).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchPostgres, freshDatabase, query } from './postgres.ts';
import { log } from './throughput.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { compileCacheDirectory } from '../../src/cli/compile-cache.ts';
import { type CycleEvent, joinTimeline, type PageMark, pageCycle } from './join-timeline.ts';

const FIXTURE = resolve(import.meta.dirname, '../fixtures/run-pipeline.ts');
const cacheDirectory = compileCacheDirectory(process.env);
const cached = cacheDirectory ? { NODE_COMPILE_CACHE: cacheDirectory } : {};
export const KEY = `bench_${Date.now().toString(36)}_joining`;
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** The run: 360 pages (72 series of 5), 150 ms answers, concurrency 2 per worker, no limit near it. */
export const JOIN_RUN = { series: 72, pagesPerSeries: 5, latencyMs: 150, concurrency: 2 } as const;

export interface Spawned {
  /** Phase name → ms since this worker was spawned (the parent's clock, when the line arrived). */
  phases: Promise<Record<string, number>>;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number; summary: { status: string; worker?: { pages: number } } | undefined; stderrTail: string[] }>;
  /** Resolves when the worker reaches `name` (or never). */
  reached(name: string): Promise<number>;
  /** The worker's process id (its memory is read from /proc by test/bench/plan-scale.ts). */
  pid: number | undefined;
  /** The pages it committed (ms since `t0`). */
  pages: PageMark[];
  /** Its requests, answers and pages (ms since `t0`), to take its page cycle apart. */
  cycle: CycleEvent[];
}

/** One worker process of the test fixture's pipeline, with phase marks on; times are ms since `t0` (the parent's clock). */
export function spawnWorker(spec: Record<string, unknown>, t0: number): Spawned {
  const spawnedAt = performance.now();
  // BENCH_CPU_PROF=<dir>: each worker writes a CPU profile there (node --cpu-prof), to see where its start goes.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...profile, FIXTURE], {
    // The fixture is a program calling run(); `webdata-etl run` turns Node's compile cache on by itself
    // (src/cli/compile-cache.ts), so the workers get it here as the command line's would, in the same directory.
    env: { ...process.env, ...cached, WEBDATA_API_KEY: KEY, WEBDATA_TEST_SPEC: JSON.stringify(spec), WEBDATA_PHASES: '1', BENCH_EVENTS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const marks: Record<string, number> = { spawn: round(spawnedAt - t0) };
  const waiting = new Map<string, (ms: number) => void>();
  // The last lines it printed on stderr besides its phase marks and page events (why a worker left: plan-scale.ts).
  const tail: string[] = [];
  const pages: PageMark[] = [];
  const cycle: CycleEvent[] = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    const lines = stderr.split('\n');
    stderr = lines.pop() ?? '';
    for (const line of lines) {
      const match = /^webdata-etl phase (\S+) /.exec(line);
      if (match?.[1]) {
        marks[match[1]] = round(performance.now() - spawnedAt);
        waiting.get(match[1])?.(performance.now() - spawnedAt);
      } else if (line.startsWith('{"type":"page"') || line.startsWith('{"type":"request"') || line.startsWith('{"type":"response"')) {
        // Timed by the worker's own clock (ms since it started), from its spawn here: pipes deliver lines late.
        const event = JSON.parse(line) as { type: 'page' | 'request' | 'response'; series: string; number?: number; t: number };
        const atMs = round(spawnedAt - t0 + event.t);
        if (event.type === 'page') pages.push({ atMs, series: event.series, number: event.number ?? 0 });
        cycle.push({ type: event.type, series: event.series, atMs });
      } else {
        // Its page events say nothing of how it left; the rest is kept, the last few (why a worker left: plan-scale.ts).
        tail.push(line.slice(0, 500));
        if (tail.length > 5) tail.shift();
        if (process.env.BENCH_DEBUG) process.stderr.write(`${line}\n`);
      }
    }
  });
  const done = new Promise<Awaited<Spawned['done']>>((resolve, reject) => {
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      marks.exit = round(performance.now() - spawnedAt);
      if (stderr) tail.push(stderr.slice(0, 500));
      const line = stdout.trim().split('\n').at(-1);
      resolve({ code, signal, atMs: performance.now() - t0, summary: line ? (JSON.parse(line) as { status: string }) : undefined, stderrTail: tail });
    });
  });
  return {
    pid: child.pid,
    pages,
    cycle,
    phases: done.then(() => marks),
    done,
    reached: (name) => new Promise((resolve) => waiting.set(name, resolve)),
  };
}

/** The CPU time (user + system, ms) a process has used, last read from /proc while it lived (every 100 ms). */
function cpuTime(pid: number | undefined): () => number {
  let ticks = 0;
  const read = () => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      ticks = Number(fields[11]) + Number(fields[12]);
    } catch {
      // Exited.
    }
  };
  const timer = setInterval(read, 100);
  return () => {
    clearInterval(timer);
    // Clock ticks of 10 ms (USER_HZ 100, Linux's on every common architecture).
    return ticks * 10;
  };
}

/** `workers` processes started together on one run: wall time from the first spawn to the last exit, and each one's phases. */
export async function joinedRun(admin: string, workers: number, lateJoiner = false) {
  const simulator = await startSimulator({ latencyMs: JOIN_RUN.latencyMs, keys: [{ key: KEY, name: 'main' }] });
  const name = `bench_join_${workers}${lateJoiner ? '_late' : ''}`;
  const url = await freshDatabase(admin, name);
  const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-'));
  try {
    const queries = Array.from({ length: JOIN_RUN.series }, (_, i) => `join query ${i}`);
    const spec = { baseUrl: simulator.url, dir, name: 'bench-join', sinks: ['postgres'], postgresUrl: url, stateUrl: url, countries: ['us'], queries, maxPages: JOIN_RUN.pagesPerSeries, concurrency: JOIN_RUN.concurrency };
    const t0 = performance.now();
    const started = Array.from({ length: workers }, () => spawnWorker(spec, t0));
    // A late joiner: spawned once the first worker has answers (the run is planned and at work), timed on its own.
    let late: Spawned | undefined;
    if (lateJoiner) {
      await started[0]?.reached('first-answer');
      late = spawnWorker(spec, t0);
      started.push(late);
    }
    const cpu = started.map((w) => cpuTime(w.pid));
    const results = await Promise.all(started.map((w) => w.done));
    const seconds = Math.max(...results.map((r) => r.atMs)) / 1000;
    const phases = await Promise.all(started.map((w) => w.phases));
    const [count] = await query<{ pages: number; rows: number }>(url, `SELECT COUNT(DISTINCT (query, country, page))::int AS pages, COUNT(*)::int AS rows FROM results`);
    const stats = simulator.stats();
    return {
      workers: started.length,
      seconds: round(seconds),
      exitCodes: results.map((r) => r.code),
      statuses: results.map((r) => r.summary?.status),
      pagesByWorker: results.map((r) => r.summary?.worker?.pages ?? 0),
      pages: count?.pages ?? 0,
      // Every page once: 2xx answers the server gave (paid) against distinct pages stored.
      answered: stats.byStatus['200'] ?? 0,
      debited: stats.credits.main?.debited ?? 0,
      phasesMs: phases,
      cpuMsByWorker: cpu.map((stop) => stop()),
      timeline: joinTimeline(started.map((w) => w.pages), phases),
      cycleByWorker: started.map((w) => pageCycle(w.cycle)),
      ...(late ? { lateJoinerMs: phases.at(-1) } : {}),
    };
  } finally {
    await simulator.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * (i) as the issue measures it: 1, 3 and 4 workers on the same run, each timed the same way (the first spawn to the
 * last exit), `rounds` times in turn (1, 3, 4, 1, 3, 4, …: the same load for each), every run reported; a speedup is
 * a round's one worker against that round's N, and the figure is their median; and a late joiner's join time.
 */
export async function scenarioJoining(admin: string, counts: number[] = [1, 3, 4], lateJoiner = true, rounds = 1) {
  log(`(i) distributed: ${JOIN_RUN.series * JOIN_RUN.pagesPerSeries} pages, ${JOIN_RUN.latencyMs} ms answers, concurrency ${JOIN_RUN.concurrency} per worker, with ${counts.join(', ')} workers (wall time, spawn to exit), ${rounds} round(s) in turn`);
  const runs = [];
  const speedups: Record<string, number[]> = {};
  for (let r = 0; r < rounds; r++) {
    const round_ = [];
    for (const workers of counts) {
      const ran = { round: r + 1, load: loadAverage(), ...(await joinedRun(admin, workers)) };
      log(`(i) round ${r + 1}, ${workers} worker(s): ${ran.seconds} s (load ${ran.load})`);
      round_.push(ran);
    }
    const one = round_.find((x) => x.workers === 1)?.seconds;
    for (const x of round_) if (x.workers > 1 && one) (speedups[`workers${x.workers}`] ??= []).push(round(one / x.seconds));
    runs.push(...round_);
  }
  if (lateJoiner) log('(i) a worker joining a run already at work (spawned at the first worker\'s first answer)');
  const joined = lateJoiner ? await joinedRun(admin, 1, true) : undefined;
  const speedup = Object.fromEntries(Object.entries(speedups).map(([k, v]) => [k, median(v)]));
  const late: Record<string, number> = joined?.lateJoinerMs ?? {};
  return {
    ...JOIN_RUN,
    pages: JOIN_RUN.series * JOIN_RUN.pagesPerSeries,
    runs,
    /** The median of the rounds' speedups; `speedups`, each round's. */
    speedup,
    speedups,
    // Spawn to registered (a worker of the run, its series queue open) and to its first request, for the late joiner.
    joinMs: { registered: late['worker-registered'] ?? null, firstRequest: late['first-request'] ?? null, phases: late },
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : round(((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2);
}

/** The machine's 1-minute load average, beside each run's figure. */
function loadAverage(): number {
  return round(loadavg()[0] ?? 0);
}

if (import.meta.main) {
  const counts = (process.argv[2] ?? '1,3,4').split(',').map(Number);
  const rounds = Number(process.argv[3] ?? 1);
  const postgres = await benchPostgres();
  if (!postgres) throw new Error('no PostgreSQL binaries and no WEBDATA_BENCH_DATABASE_URL');
  try {
    process.stdout.write(`${JSON.stringify(await scenarioJoining(postgres.admin, counts, process.argv[4] !== 'nolate', rounds))}\n`);
  } finally {
    postgres.close();
  }
}
