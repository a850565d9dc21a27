// A year on one database (issue 43, item 4): a pipeline of `--series` series (queries × 4 countries, one page each)
// run once a simulated day (the simulator's days: each series' ranking as it stands that day) for `--days` days into
// one SQLite file, twice: without a retention, and with `retention: { runs: --keep }` applied after each run as the
// worker applies it. Prints one JSON object: for each, the file's size (and the bytes in use: SQLite reuses freed
// pages, it does not give them back), the rows of the tables that grow, the time `webdata-etl runs` and the analytics
// views take at the end, and with retention the time the prunes took.
// `node scripts/with-node.mjs test/bench/year.ts [--days 365] [--series 1000] [--keep 90] [--concurrency 32]
// [--variant both|without|with] [--dir <dir>]` (a year of 1,000 series: 6-8 minutes a variant on 2 cores when quiet;
// `--days 30 --series 200` in well under a minute). The simulator answers at once and the runs page `--concurrency`
// series at a time, in process: a day of 1,000 series is about a second. `--dir` keeps the files there
// (`without.sqlite`, `with.sqlite`) instead of removing them; `--measure <file>` only measures a file kept so, after
// re-creating its views as a run opening it does (so that a change to the views is measured on the same year).
// `--store postgres`: the sink (schema public) and the state (schema webdata) in a throwaway PostgreSQL cluster
// instead (year-postgres.ts), measured likewise (pg_database_size and each table's size); with `--dir` the clusters
// are kept there, stopped (`without/`, `with/`), and `--measure <dir>/without` starts one again to measure it, its
// views re-created first; `--plans <file>` writes each view's EXPLAIN (ANALYZE, BUFFERS) there.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { definePipeline, normalize, run, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { postgresPruneDatabase } from '../../src/state/postgres/prune.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { measurePostgres, recreatePostgresViews, yearCluster } from './year-postgres.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { applicableViews, createResultsViews } from '../../src/analytics/views.ts';
import { sqlitePruneDatabase } from '../../src/state/sqlite/prune.ts';
import { prune } from '../../src/state/prune.ts';

const { values } = parseArgs({
  options: {
    days: { type: 'string' },
    series: { type: 'string' },
    keep: { type: 'string' },
    concurrency: { type: 'string' },
    variant: { type: 'string' },
    dir: { type: 'string' },
    measure: { type: 'string' },
    store: { type: 'string' },
    plans: { type: 'string' },
  },
});
const DAYS = Number(values.days ?? 365);
const SERIES = Number(values.series ?? 1000);
const KEEP = Number(values.keep ?? 90);
const CONCURRENCY = Number(values.concurrency ?? 32);
const VARIANT = values.variant ?? 'both';
const POSTGRES = values.store === 'postgres';
if (values.store !== undefined && !['sqlite', 'postgres'].includes(values.store)) throw new Error(`--store: sqlite or postgres, not ${values.store}`);
const COUNTRIES = ['us', 'gb', 'de', 'fr'];
const KEY = 'sk_year_0123456789abcdef';
// The built command line, as a user runs it (dist/, which the tests' global setup builds; `npm run build`).
const CLI = resolve(import.meta.dirname, '../../dist/cli/main.js');
const GROWING = ['runs', 'series', 'series_state', 'pages', 'run_sinks', 'spend', 'results', 'results_outcomes'];

/** Milliseconds `work` takes. */
function timed(work: () => void): number {
  const started = performance.now();
  work();
  return Math.round(performance.now() - started);
}

/** What a year left in the file: its size, the bytes in use, the rows that grow, and what reading it takes. */
function measure(path: string) {
  const db = new Database(path);
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const free = db.pragma('freelist_count', { simple: true }) as number;
    const rows = Object.fromEntries(GROWING.map((table) => [table, db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number]));
    const views = Object.fromEntries(
      ['report_rankings', 'report_changes', 'webdata_spend'].map((view) => [view, timed(() => db.prepare(`SELECT count(*) FROM ${view}`).pluck().get())]),
    );
    const bytes = statSync(path).size;
    return { bytes, bytesInUse: bytes - free * pageSize, rows, viewsMs: views, runsMs: timed(() => execFileSync(process.execPath, [CLI, 'runs', path, '--json'], { stdio: 'ignore' })) };
  } finally {
    db.close();
  }
}

/** `--days` daily runs into a fresh file, with the retention applied after each (as the worker does) when `keep` is given. */
async function year(keep: number | undefined) {
  const dir = values.dir ?? mkdtempSync(join(tmpdir(), 'webdata-year-'));
  const path = join(dir, keep === undefined ? 'without.sqlite' : 'with.sqlite');
  if (values.dir !== undefined) rmSync(path, { force: true });
  const kept = join(dir, keep === undefined ? 'without' : 'with');
  if (POSTGRES && values.dir !== undefined) rmSync(kept, { recursive: true, force: true });
  const cluster = POSTGRES ? await yearCluster(values.dir === undefined ? undefined : kept) : undefined;
  const sim = await startSimulator({ keys: [{ key: KEY, name: 'main' }], day: 0 });
  const queries = Array.from({ length: Math.ceil(SERIES / COUNTRIES.length) }, (_, i) => `product ${i + 1}`);
  const pipeline = definePipeline({
    name: 'daily',
    source: searchPages({ queries, countries: COUNTRIES, maxPages: 1 }),
    stages: [normalize()],
    sinks: [cluster === undefined ? toSqlite({ path, table: 'results' }) : toPostgres({ url: cluster.url, table: 'results' })],
    ...(cluster === undefined ? {} : { state: { url: cluster.url } }),
    rate: { concurrency: CONCURRENCY },
    ...(keep === undefined ? {} : { retention: { runs: keep } }),
  });
  const pruned = { ms: 0, slowestMs: 0, runs: 0 };
  const began = Date.now();
  try {
    for (let day = 0; day < DAYS; day++) {
      sim.setDay(day);
      const summary = await run(pipeline, { baseUrl: sim.url, apiKey: KEY, env: {} });
      if (summary.status !== 'completed') throw new Error(`day ${day}: ${summary.status}`);
      if (day % 30 === 29) process.stderr.write(`${keep === undefined ? 'without' : 'with'}: day ${day + 1}, ${Math.round((Date.now() - began) / 1000)} s\n`);
      if (keep === undefined) continue;
      const db = cluster === undefined ? sqlitePruneDatabase(path) : await postgresPruneDatabase(postgresTarget(cluster.url), 'webdata');
      try {
        const started = performance.now();
        const report = await prune(db, [{ pipeline: 'daily', runs: keep, spendDays: null }], { apply: true });
        const ms = performance.now() - started;
        pruned.ms += ms;
        pruned.slowestMs = Math.max(pruned.slowestMs, Math.round(ms));
        pruned.runs += report.pipelines[0]?.runs.length ?? 0;
      } finally {
        await db.close();
      }
    }
    const measured = cluster === undefined ? measure(path) : await measurePostgres(cluster.url, CLI, values.plans === undefined ? undefined : `${values.plans}.${keep === undefined ? 'without' : 'with'}`);
    return { retention: keep === undefined ? null : { runs: keep }, seconds: Math.round((Date.now() - began) / 1000), ...measured, ...(keep === undefined ? {} : { prune: { ...pruned, ms: Math.round(pruned.ms) } }) };
  } finally {
    await sim.close();
    cluster?.destroy();
    if (values.dir === undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/** A kept file measured again, its views re-created first as the next run opening it would (`createResultsViews`). */
function remeasure(path: string) {
  const db = new Database(path);
  try {
    createResultsViews(db, 'results', applicableViews('append', true), 'append');
  } finally {
    db.close();
  }
  return measure(path);
}

if (values.measure !== undefined && POSTGRES) {
  const cluster = await yearCluster(values.measure);
  try {
    const made = await recreatePostgresViews(cluster.url);
    process.stdout.write(`${JSON.stringify({ cluster: values.measure, ...made, ...(await measurePostgres(cluster.url, CLI, values.plans)) }, null, 2)}\n`);
  } finally {
    cluster.destroy();
  }
} else if (values.measure !== undefined) {
  process.stdout.write(`${JSON.stringify({ file: values.measure, ...remeasure(values.measure) }, null, 2)}\n`);
} else {
  const without = VARIANT === 'with' ? null : await year(undefined);
  const withRetention = VARIANT === 'without' ? null : await year(KEEP);
  process.stdout.write(`${JSON.stringify({ store: POSTGRES ? 'postgres' : 'sqlite', days: DAYS, series: SERIES, concurrency: CONCURRENCY, without, with: withRetention }, null, 2)}\n`);
}
