// The fleet's throughput and the database's cost per page (issue 43, items 2 and 3): `workers` processes started
// together on a plan of `series` series (queries × 40 countries, one page of 10 items each) with a budget of `budget`
// credits, against the simulator answering in 50 ms. Prints pages/s (the first request of any worker to the last
// worker's `pages-done`, and spawn to the last exit), and per page, during paging and at the close apart:
// transactions (pg_stat_database's xact_commit + xact_rollback), row writes (n_tup_ins + n_tup_upd + n_tup_del of
// pg_stat_user_tables, by table), the statements by calls (pg_stat_statements, loaded at the throwaway cluster's
// start), the server's CPU seconds (utime + stime of the postmaster, its children and the children it reaped, from
// /proc) and the workers'; and over the whole run, from spawn to the last exit (`whole`: the plan's job rows, a row a
// series planned, included; exact, where an interval's table figures are late by what a backend had not yet flushed
// to the server's statistics: the planner's inserts, counted in `paging` when its connections flush after the first
// request). Its own throwaway cluster (it restarts it with pg_stat_statements): run it under `nice`:
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
  /** Row writes by table and kind (`ins`, `upd` of which `hot`, `del`), for the tables written most. */
  kinds: Record<string, { ins: number; upd: number; hot: number; del: number }>;
  statements: Map<string, number>;
  /** Rows each statement returned or changed (pg_stat_statements' `rows`): counted as it ends, not as a backend flushes. */
  statementRows: Map<string, number>;
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
  const started: Spawned[] = [];
  const snapshot = async (): Promise<Snapshot> => {
    for (const w of started) if (w.pid !== undefined) workerCpu.set(w.pid, cpuOf(w.pid)?.own ?? workerCpu.get(w.pid) ?? 0);
    const [db] = await query<{ x: string }>(url, `SELECT xact_commit + xact_rollback AS x FROM pg_stat_database WHERE datname = current_database()`);
    const tables = await query<{ t: string; w: string; i: string; u: string; h: string; d: string }>(url, `SELECT schemaname || '.' || relname AS t, n_tup_ins + n_tup_upd + n_tup_del AS w, n_tup_ins AS i, n_tup_upd AS u, n_tup_hot_upd AS h, n_tup_del AS d FROM pg_stat_user_tables`);
    const statements = await query<{ q: string; c: string; r: string }>(url, `SELECT query AS q, calls AS c, rows AS r FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`);
    const grouped = new Map<string, number>();
    const rows = new Map<string, number>();
    for (const row of statements) {
      const text = row.q.replace(/\s+/g, ' ').slice(0, 110);
      grouped.set(text, (grouped.get(text) ?? 0) + Number(row.c));
      rows.set(text, (rows.get(text) ?? 0) + Number(row.r));
    }
    return {
      at: performance.now(),
      xacts: Number(db?.x),
      writes: Object.fromEntries(tables.map((row) => [row.t, Number(row.w)])),
      kinds: Object.fromEntries(tables.map((row) => [row.t, { ins: Number(row.i), upd: Number(row.u), hot: Number(row.h), del: Number(row.d) }])),
      statements: grouped,
      statementRows: rows,
      serverCpuS: serverCpu(cluster.dataDir),
      workersCpuS: [...workerCpu.values()].reduce((a, b) => a + b, 0),
    };
  };
  /**
   * pg-boss's job rows by what wrote them: inserted (the plan's: a row per series planned), fetched (state → active),
   * completed (a statement a job: its `rows` is the one row of its count) — by pg_stat_statements, counted as each
   * statement ends — and the
   * table's other updates (touches by the beats, hand-backs, cancels: its n_tup_upd less the two), which as every
   * table figure reach the server's statistics only as each backend flushes them (an idle one within seconds, one
   * exiting at its exit): exact over the whole run, late by up to that within an interval.
   */
  const jobRows = (a: Snapshot, b: Snapshot, pages: number) => {
    const rows = (pattern: RegExp) => [...b.statementRows].filter(([q]) => pattern.test(q)).reduce((sum, [q, n]) => sum + n - (a.statementRows.get(q) ?? 0), 0);
    const table = Object.keys(b.kinds).find((t) => t.endsWith('.job_common')) ?? '';
    const upd = (b.kinds[table]?.upd ?? 0) - (a.kinds[table]?.upd ?? 0);
    const inserted = rows(/^INSERT INTO \S+\.job_common /);
    const fetched = rows(/^WITH next AS \( SELECT j\.id FROM \S+\.job_common /);
    const completed = rows(/^WITH results AS \( UPDATE \S+\.job_common SET completed_on/);
    const r = (v: number) => Math.round((v / pages) * 1000) / 1000;
    return { inserted: r(inserted), fetched: r(fetched), completed: r(completed), otherUpdates: r(upd - fetched - completed) };
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
      // The tables written most, by kind of write; and the statements by the rows they returned or changed.
      writeKindsPerPage: Object.fromEntries(writes.slice(0, 6).map(([t]) => {
        const k = (kind: 'ins' | 'upd' | 'hot' | 'del') => r(((b.kinds[t]?.[kind] ?? 0) - (a.kinds[t]?.[kind] ?? 0)) / pages);
        return [t, { ins: k('ins'), upd: k('upd'), hot: k('hot'), del: k('del') }];
      })),
      jobRowsPerPage: jobRows(a, b, pages),
      statementRowsPerPage: Object.fromEntries([...b.statementRows].map(([q, n]) => [q, (n - (a.statementRows.get(q) ?? 0)) / pages] as const).filter(([, n]) => n > 0).sort((x, y) => y[1] - x[1]).slice(0, 20).map(([q, n]) => [q, r(n)])),
      serverCpuMsPerPage: r(((b.serverCpuS - a.serverCpuS) * 1000) / pages),
      workersCpuMsPerPage: r(((b.workersCpuS - a.workersCpuS) * 1000) / pages),
    };
  };
  const pagesSoFar = async () => Number((await query<{ n: string }>(url, `SELECT coalesce(sum(pages), 0) AS n FROM webdata.workers`).catch(() => [{ n: '0' }]))[0]?.n ?? 0);
  const spawned = await snapshot();
  const t0 = performance.now();
  started.push(...Array.from({ length: workers }, () => spawnWorker(spec, t0)));
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
  const whole = per(spawned, end, Math.max(1, pages));
  const outcomes = Object.entries(whole.rowWritesByTable).find(([t]) => t.endsWith('_outcomes'))?.[1] ?? 0;
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
    // The whole run, spawn to exit (planning included: its inserts are the plan's, a row per series planned).
    whole,
    // Issue 43's row writes a page, the whole run's split by whose they are: the plan's job rows (a row a series
    // planned), the close's outcome rows (a row a series of the plan), and the rest, the pages' own.
    rowWritesAccount: {
      plan: whole.jobRowsPerPage.inserted,
      closeOutcomes: outcomes,
      pagesOwn: Math.round((whole.rowWritesPerPage - whole.jobRowsPerPage.inserted - outcomes) * 1000) / 1000,
    },
    closeMs: phases.map((p) => Math.round((p.leaving ?? Number.NaN) - (p.closing ?? Number.NaN))),
  }, null, process.env.BENCH_PRETTY ? 1 : undefined));
} finally {
  await simulator.close();
  rmSync(dir, { recursive: true, force: true });
  cluster.destroy();
}
