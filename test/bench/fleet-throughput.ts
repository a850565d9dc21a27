// The fleet's throughput and the database's cost per page (issue 43, items 2 and 3): `workers` processes started
// together on a plan of `series` series (queries × 40 countries, one page of 10 items each) with a budget of `budget`
// credits, against the simulator answering in 50 ms. Prints pages/s (the first request of any worker to the last
// worker's `pages-done`, and spawn to the last exit), and per page, during paging and at the close apart:
// transactions (pg_stat_database's xact_commit + xact_rollback), row writes (n_tup_ins + n_tup_upd + n_tup_del of
// pg_stat_user_tables, by table), the statements by calls (pg_stat_statements, loaded at the throwaway cluster's
// start), the server's CPU seconds (utime + stime of the postmaster, its children and the children it reaped, from
// /proc) and the workers'. Its own throwaway cluster (it restarts it with pg_stat_statements): run it under `nice`:
// `node scripts/with-node.mjs test/bench/fleet-throughput.ts [series] [workers] [budget]`.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase, query } from './postgres.ts';
import { KEY, type Spawned, spawnWorker } from './joining.ts';
import { postgresBin, startCluster } from '../postgres/pg-cluster.ts';
import { startSimulator } from '../../src/simulator/index.ts';

const [series = 20_000, workers = 8, budget = 4_000] = process.argv.slice(2).map(Number);
const COUNTRIES = ['us', 'gb', 'de', 'fr', 'it', 'es', 'nl', 'se', 'pl', 'ca', 'au', 'br', 'mx', 'ar', 'jp', 'kr', 'in', 'id', 'tr', 'za', 'ch', 'at', 'be', 'dk', 'fi', 'no', 'ie', 'pt', 'cz', 'hu', 'ro', 'gr', 'nz', 'sg', 'my', 'ph', 'th', 'vn', 'cl', 'co'];
const TICKS = 100; // USER_HZ: /proc's CPU times are in clock ticks of 1/100 s on Linux.

/** CPU seconds of a process from /proc/<pid>/stat: its own (utime + stime), and with its reaped children's (cutime + cstime). */
function cpuOf(pid: number): { own: number; reaped: number; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command may hold spaces and parentheses: the fields start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const n = (i: number) => Number(fields[i - 3]);
    return { own: (n(14) + n(15)) / TICKS, reaped: (n(16) + n(17)) / TICKS, ppid: n(4) };
  } catch {
    return undefined;
  }
}

/** The server's CPU seconds so far: the postmaster's own and reaped children's, and its living children's own. */
function serverCpu(dataDir: string): number {
  const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const root = cpuOf(postmaster);
  let total = (root?.own ?? 0) + (root?.reaped ?? 0);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const child = cpuOf(Number(entry));
    if (child?.ppid === postmaster) total += child.own;
  }
  return total;
}

interface Snapshot {
  at: number;
  xacts: number;
  writes: Record<string, number>;
  statements: Map<string, number>;
  serverCpuS: number;
  workersCpuS: number;
}

const cluster = await startCluster(postgresBin() ?? '');
const simulator = await startSimulator({ latencyMs: 50, keys: [{ key: KEY, name: 'main' }] });
const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-'));
try {
  await query(cluster.url, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`);
  cluster.stop();
  cluster.start();
  const url = await freshDatabase(cluster.url, 'bench_fleet_throughput');
  await query(url, 'CREATE EXTENSION pg_stat_statements');
  const queryCount = Math.ceil(series / COUNTRIES.length);
  const spec = { baseUrl: simulator.url, dir, name: 'bench-fleet-throughput', sinks: ['postgres'], postgresUrl: url, stateUrl: url, countries: COUNTRIES, queries: [], queryCount, maxPages: 1, concurrency: 4, budget };
  const workerCpu = new Map<number, number>();
  const snapshot = async (): Promise<Snapshot> => {
    for (const w of started) if (w.pid !== undefined) workerCpu.set(w.pid, cpuOf(w.pid)?.own ?? workerCpu.get(w.pid) ?? 0);
    const [db] = await query<{ x: string }>(url, `SELECT xact_commit + xact_rollback AS x FROM pg_stat_database WHERE datname = current_database()`);
    const tables = await query<{ t: string; w: string }>(url, `SELECT schemaname || '.' || relname AS t, n_tup_ins + n_tup_upd + n_tup_del AS w FROM pg_stat_user_tables`);
    const statements = await query<{ q: string; c: string }>(url, `SELECT query AS q, calls AS c FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`);
    const grouped = new Map<string, number>();
    for (const row of statements) {
      const text = row.q.replace(/\s+/g, ' ').slice(0, 110);
      grouped.set(text, (grouped.get(text) ?? 0) + Number(row.c));
    }
    return {
      at: performance.now(),
      xacts: Number(db?.x),
      writes: Object.fromEntries(tables.map((row) => [row.t, Number(row.w)])),
      statements: grouped,
      serverCpuS: serverCpu(cluster.dataDir),
      workersCpuS: [...workerCpu.values()].reduce((a, b) => a + b, 0),
    };
  };
  const per = (a: Snapshot, b: Snapshot, pages: number) => {
    const writes = Object.entries(b.writes).map(([t, w]) => [t, (w - (a.writes[t] ?? 0)) / pages] as const).filter(([, w]) => w > 0).sort((x, y) => y[1] - x[1]);
    const calls = [...b.statements].map(([q, c]) => [q, (c - (a.statements.get(q) ?? 0)) / pages] as const).filter(([, c]) => c > 0).sort((x, y) => y[1] - x[1]);
    const r = (v: number) => Math.round(v * 1000) / 1000;
    return {
      pages,
      seconds: r((b.at - a.at) / 1000),
      transactionsPerPage: r((b.xacts - a.xacts) / pages),
      rowWritesPerPage: r(writes.reduce((sum, [, w]) => sum + w, 0)),
      rowWritesByTable: Object.fromEntries(writes.map(([t, w]) => [t, r(w)])),
      statementsPerPage: r(calls.reduce((sum, [, c]) => sum + c, 0)),
      statementCallsPerPage: Object.fromEntries(calls.slice(0, 25).map(([q, c]) => [q, r(c)])),
      serverCpuMsPerPage: r(((b.serverCpuS - a.serverCpuS) * 1000) / pages),
      workersCpuMsPerPage: r(((b.workersCpuS - a.workersCpuS) * 1000) / pages),
    };
  };
  const pagesSoFar = async () => Number((await query<{ n: string }>(url, `SELECT coalesce(sum(pages), 0) AS n FROM webdata.workers`).catch(() => [{ n: '0' }]))[0]?.n ?? 0);
  const t0 = performance.now();
  const started: Spawned[] = Array.from({ length: workers }, () => spawnWorker(spec, t0));
  await Promise.race(started.map((w) => w.reached('first-request')));
  const first = await snapshot();
  const firstPages = await pagesSoFar();
  // Paging ends when every worker has passed `pages-done` (or exited).
  await Promise.all(started.map((w) => Promise.race([w.reached('pages-done'), w.done])));
  const paged = await snapshot();
  const pagedPages = await pagesSoFar();
  const results = await Promise.all(started.map((w) => w.done));
  const exitedAt = performance.now();
  // The statistics of sessions reach the server's as they end (at most a second late): read once every worker exited.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const end = await snapshot();
  const phases = await Promise.all(started.map((w) => w.phases));
  const pages = results.reduce((sum, r) => sum + (r.summary?.worker?.pages ?? 0), 0);
  const stats = simulator.stats();
  const s = (ms: number) => Math.round(ms / 100) / 10;
  console.log(JSON.stringify({
    series: queryCount * COUNTRIES.length,
    workers,
    budget,
    loadAverage: loadavg().map((l) => Math.round(l * 100) / 100),
    codes: results.map((r) => r.code),
    statuses: results.map((r) => r.summary?.status),
    pages,
    debited: stats.credits.main?.debited ?? 0,
    firstRequestS: s(first.at - t0),
    pagingS: s(paged.at - first.at),
    wallS: s(exitedAt - t0),
    pagesPerSecondPaging: Math.round(((pagedPages - firstPages) / (paged.at - first.at)) * 10_000) / 10,
    pagesPerSecondSpawnToExit: Math.round((pages / (exitedAt - t0)) * 10_000) / 10,
    paging: per(first, paged, Math.max(1, pagedPages - firstPages)),
    close: per(paged, end, Math.max(1, pages)),
    closeMs: phases.map((p) => Math.round((p.leaving ?? Number.NaN) - (p.closing ?? Number.NaN))),
  }, null, process.env.BENCH_PRETTY ? 1 : undefined));
} finally {
  await simulator.close();
  rmSync(dir, { recursive: true, force: true });
  cluster.destroy();
}
