// Issue 42 item 3, "Series not fetched are recorded as `skipped` — not failed, not dropped: the views keep their last
// ranks with their age, `changes` never reports a skip as a move, the report shows the age." Five real runs over the
// simulator's days into SQLite (and PostgreSQL), each run fetching the series its plan chose; the series it did not
// fetch are then recorded as such a run records them (docs/analytics.md#skipped-series): an outcome `skipped` through
// the sink's own outcomes writer (sqliteOutcomes, postgresOutcomes), no rows, no tracked rows.
import Database from 'better-sqlite3';
import { readFileSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportReport } from '../../src/analytics/index.ts';
import { openReader } from '../../src/analytics/reader.ts';
import { normalize, type PipelineDefinition, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { type Digest, runDigest } from '../../src/notify/digest.ts';
import { readReportData } from '../../src/report/data.ts';
import { renderReport } from '../../src/report/index.ts';
import type { ResultsDatabase } from '../../src/sinks/sink.ts';
import { postgresOutcomes } from '../../src/sinks/postgres-outcomes.ts';
import { MAX_POSTGRES_TABLE } from '../../src/sinks/postgres.ts';
import { sqliteOutcomes } from '../../src/sinks/sqlite-outcomes.ts';
import type { NotificationStore } from '../../src/state/notification-store.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { type Row, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const COUNTRIES = ['us', 'gb'];
/** Fetched every run. */
const ALWAYS = 'espresso';
/** Fetched in runs 1 and 2, skipped in runs 3 and 4, fetched again in run 5. */
const SKIPPED = 'teapot';
/** Fetched in run 1, failed in run 2, skipped in runs 3 and 4, fetched again in run 5. */
const FAILED = 'kettle';
const ALL = [ALWAYS, SKIPPED, FAILED];

/** What is read of one database: a relation's rows (`where` after it), as plain values. */
type Read = (relation: string, where?: string) => Promise<Row[]>;

interface Output {
  sinks: () => PipelineDefinition['sinks'];
  /** Records, in every output, the series a run did not fetch as `skipped`, as the run records them. */
  skip: (runId: string, queries: readonly string[]) => Promise<void>;
  reads: { label: string; read: Read; database: string; digest: (runId: string) => Promise<Digest> }[];
}

const skippedOutcomes = (queries: readonly string[]) => queries.flatMap((query) => COUNTRIES.map((country) => ({ query, country, lang: 'en', complete: false, reason: 'skipped' })));

function pipeline(sinks: PipelineDefinition['sinks'], queries: readonly string[], domains: string[]): PipelineDefinition {
  return { name: 'skipping', source: searchPages({ queries: [...queries], countries: COUNTRIES, langs: ['en'], maxPages: 2, count: 10 }), stages: [normalize()], sinks, track: { domains } };
}

/** The tracked domains: one of each query's results on the first day, on its first page. */
function trackedDomains(sim: Simulator): string[] {
  return ALL.map((q) => sim.ranking({ q, country: 'us', lang: 'en' })[3]?.domain as string);
}

/** Rows as sorted text, each with its columns in name order, so that two reads of the same rows compare alike. */
const byKey = (rows: Row[]) => rows.map((row) => JSON.stringify(Object.entries(row).sort(([a], [b]) => (a < b ? -1 : 1)))).sort();

/** The webhook digest of a run (its failed series are not asked for: the state store is not this test's). */
function digestAt(at: ResultsDatabase, runId: string): Promise<Digest> {
  return runDigest({ runId, store: {} as NotificationStore, changes: { at, table: 'results' }, failedSeries: 0, top: 20, minRankMove: 1 });
}

async function reportFor(database: string, query: string) {
  const reader = await openReader(database);
  try {
    return await readReportData(reader, { table: 'results', query, maxQueries: 1, maxLines: 6, maxRuns: 50 });
  } finally {
    await reader.close();
  }
}

/** The runs so far, and what each output read of the skipped series after run 2, its last fetched run. */
interface Runs {
  ids: string[];
  domains: string[];
  before: Map<string, { changes: string[]; rankings: string[]; tracked: string[] }>;
  runDay(day: number, queries: readonly string[]): Promise<string>;
}

/**
 * Runs 1 to 4 (run 2 with FAILED failing on purpose), each on its day, recording what each did not fetch as skipped;
 * what each output read of the skipped series after run 2, its last fetched run, is kept in `runs.before`.
 */
async function firstFourRuns(sim: Simulator, o: Output, runs: Runs): Promise<void> {
  runs.domains = trackedDomains(sim);
  runs.runDay = async (day, queries) => {
    sim.setDay(day);
    const summary = await runOn(sim, pipeline(o.sinks(), queries, runs.domains));
    runs.ids.push(summary.runId);
    await o.skip(summary.runId, ALL.filter((q) => !queries.includes(q)));
    return summary.status;
  };
  await runs.runDay(1, ALL);
  sim.inject({ match: { q: FAILED, page: 1 }, fault: 'status', status: 400 });
  expect(await runs.runDay(8, ALL)).toBe('failed_series');
  sim.clearRules();
  const run2 = runs.ids[1] as string;
  for (const { label, read } of o.reads) {
    runs.before.set(label, {
      changes: byKey(await read('report_changes', `WHERE query = '${SKIPPED}'`)),
      rankings: byKey((await read('report_rankings', `WHERE query = '${SKIPPED}'`)).map(({ age_runs: _, ...row }) => row)),
      tracked: byKey(await read('report_tracked', `WHERE query = '${SKIPPED}' AND run_id = '${run2}'`)),
    });
  }
  await runs.runDay(15, [ALWAYS]);
  await runs.runDay(22, [ALWAYS]);
}

/**
 * Runs 1 to 4 before the tests of `describe` (which read the outputs as run 4 left them), and run 5 in its last test:
 * `output()` is called in beforeAll, once the databases are there.
 */
function afterFourRuns(output: () => Promise<Output>, close: () => Promise<void>) {
  let sim: Simulator;
  let o: Output;
  const runs: Runs = { ids: [], domains: [], before: new Map(), runDay: async () => '' };
  beforeAll(async () => {
    o = await output();
    sim = await simulator({ seed: 42, day: 1 });
    await firstFourRuns(sim, o, runs);
  }, 120_000);
  afterAll(async () => {
    await sim?.[Symbol.asyncDispose]();
    await close();
  });
  const each = async (check: (read: Output['reads'][number], label: string) => Promise<void>) => {
    for (const read of o.reads) await check(read, read.label);
  };
  const ids = () => runs.ids as [string, string, string, string, string];

  it('changes: a skipped series is neither failed, new, lost nor moved: it keeps the comparison of its last two fetched runs; a failure skipped since stays failed', async () => {
    const [run1, run2, run3, run4] = ids();
    await each(async ({ read }, label) => {
      const changes = await read('report_changes');
      const mine = changes.filter((c) => c.query === SKIPPED);
      expect(byKey(mine), label).toEqual(runs.before.get(label)?.changes);
      expect(new Set(mine.map((c) => `${c.run_id} ${c.previous_run_id}`)), label).toEqual(new Set([`${run2} ${run1}`]));
      expect(
        changes.filter((c) => c.change === 'failed').map((c) => `${c.query} ${c.country} ${c.run_id} ${c.previous_run_id} ${c.reason}`).sort(),
        label,
      ).toEqual([`${FAILED} gb ${run2} ${run1} failed`, `${FAILED} us ${run2} ${run1} failed`]);
      expect(changes.some((c) => c.reason === 'skipped'), label).toBe(false);
      expect(new Set(changes.filter((c) => c.query === ALWAYS).map((c) => `${c.run_id} ${c.previous_run_id}`)), label).toEqual(new Set([`${run4} ${run3}`]));
    });
  });

  it('rankings, domains and overlap: a skipped series keeps its last fetched run’s rows, with age_runs, the runs since', async () => {
    const [run1, run2, , run4] = ids();
    await each(async ({ read }, label) => {
      const rankings = await read('report_rankings');
      const ages = (query: string) => [...new Set(rankings.filter((r) => r.query === query).map((r) => `${r.run_id} ${r.age_runs}`))];
      expect(ages(SKIPPED), label).toEqual([`${run2} 2`]);
      expect(ages(FAILED), label).toEqual([`${run1} 3`]);
      expect(ages(ALWAYS), label).toEqual([`${run4} 0`]);
      expect(byKey(rankings.filter((r) => r.query === SKIPPED).map(({ age_runs: _, ...row }) => row)), label).toEqual(runs.before.get(label)?.rankings);
      const domainsOf = await read('report_domains', `WHERE query = '${SKIPPED}'`);
      expect(domainsOf.reduce((n, d) => n + Number(d.results), 0), label).toBe(rankings.filter((r) => r.query === SKIPPED).length);
      expect(await read('report_overlap', `WHERE query = '${SKIPPED}'`), label).toHaveLength(1);
    });
  });

  it('report_tracked has no row of a run that skipped a series; report_tracked_latest has its last ranks and their age', async () => {
    const [, , run3, run4] = ids();
    await each(async ({ read }, label) => {
      expect(await read('report_tracked', `WHERE query = '${SKIPPED}' AND run_id IN ('${run3}', '${run4}')`), label).toEqual([]);
      const latest = await read('report_tracked_latest');
      const skippedLatest = latest.filter((r) => r.query === SKIPPED);
      expect(skippedLatest.length, label).toBe(COUNTRIES.length * runs.domains.length);
      expect(new Set(skippedLatest.map((row) => row.age_runs)), label).toEqual(new Set([2]));
      expect(byKey(skippedLatest.map(({ age_runs: _, ...row }) => row)), label).toEqual(runs.before.get(label)?.tracked);
      for (const row of latest) expect(row.age_runs, `${label} ${row.query} ${row.country}`).toBe(runs.ids.filter((id) => id > String(row.run_id)).length);
      expect(new Set(latest.filter((r) => r.query === ALWAYS).map((r) => `${r.run_id} ${r.age_runs}`)), label).toEqual(new Set([`${run4} 0`]));
    });
  });

  it('the webhook digest of a run lists what changed in it, never a skipped (or failed) series’ older comparison', async () => {
    const run4 = ids()[3];
    await each(async ({ digest: digestOf }, label) => {
      const digest = await digestOf(run4);
      expect(digest.notes, label).toEqual([]);
      expect(new Set(digest.series.map((s) => s.query)), label).toEqual(new Set([ALWAYS]));
    });
  });

  it('the report: a skipped run is not shaded as one that did not complete, and the tracked panel gives each rank’s age', async () => {
    const run2 = ids()[1];
    await each(async ({ database }, label) => {
      const skippedHistory = (await reportFor(database, SKIPPED)).histories[0];
      expect(skippedHistory?.incomplete, label).toEqual([null, null, null, null]);
      expect(skippedHistory?.skipped, label).toEqual([false, false, true, true]);
      for (const line of skippedHistory?.series ?? []) expect(line.ranks.slice(2), label).toEqual([null, null]);
      expect((await reportFor(database, FAILED)).histories[0]?.incomplete, label).toEqual([null, 'failed', null, null]);
      const tracked = (await reportFor(database, SKIPPED)).tracked;
      expect(tracked.length, label).toBe(COUNTRIES.length * runs.domains.length);
      expect(new Set(tracked.map((t) => `${t.runId} ${t.age}`)), label).toEqual(new Set([`${run2} 2`]));
    });
    const path = o.reads[0]?.database as string;
    const html = await renderReport({ database: path, query: SKIPPED });
    expect(html).not.toContain('data-mark="incomplete"');
    expect(html).toContain('<td>2 runs ago</td>');
    expect(html).toContain('its refresh plan skipped this query');
    expect(await renderReport({ database: path, query: ALWAYS })).toContain('<td>latest run</td>');
  });

  it('fetched again (run 5), each series is compared with its last fetched complete run, the skips passed over; every age is 0', async () => {
    const [run1, run2, , run4] = ids();
    await runs.runDay(29, ALL);
    const run5 = runs.ids[4] as string;
    await each(async ({ read }, label) => {
      const changes = await read('report_changes');
      expect(changes.filter((c) => c.change === 'failed'), label).toEqual([]);
      const compared = (query: string) => [...new Set(changes.filter((c) => c.query === query).map((c) => `${c.run_id} ${c.previous_run_id}`))];
      expect(compared(ALWAYS), label).toEqual([`${run5} ${run4}`]);
      expect(compared(SKIPPED), label).toEqual([`${run5} ${run2}`]);
      expect(compared(FAILED), label).toEqual([`${run5} ${run1}`]);
      expect(new Set((await read('report_rankings')).map((r) => `${r.run_id} ${r.age_runs}`)), label).toEqual(new Set([`${run5} 0`]));
      expect(new Set((await read('report_tracked_latest')).map((r) => `${r.run_id} ${r.age_runs}`)), label).toEqual(new Set([`${run5} 0`]));
    });
  });

  return { output: () => o };
}

function sqliteOutput(path: string): Output['reads'][number] & { skip: Output['skip'] } {
  return {
    label: 'SQLite',
    database: path,
    read: async (relation, where = '') => sqliteRows(path, `SELECT * FROM ${relation} ${where}`),
    digest: async (runId) => {
      const db = new Database(path, { readonly: true });
      try {
        return await digestAt({ kind: 'sqlite', db }, runId);
      } finally {
        db.close();
      }
    },
    skip: async (runId, queries) => {
      const writer = new Database(path);
      try {
        sqliteOutcomes(writer, 'results').record(runId, skippedOutcomes(queries));
      } finally {
        writer.close();
      }
    },
  };
}

describe('SQLite', () => {
  let dir: ReturnType<typeof workdir> | undefined;
  afterFourRuns(
    async () => {
      dir = workdir();
      const path = dir.path('skip.sqlite');
      const out = sqliteOutput(path);
      return { sinks: () => [toSqlite({ path })], skip: out.skip, reads: [out] };
    },
    async () => dir?.[Symbol.dispose](),
  );
});

describePostgres('PostgreSQL beside SQLite', () => {
  let dir: ReturnType<typeof workdir> | undefined;
  let db: Awaited<ReturnType<typeof testDatabase>> | undefined;
  let pool: pg.Pool | undefined;
  const { output } = afterFourRuns(
    async () => {
      dir = workdir();
      const path = dir.path('both.sqlite');
      db = await testDatabase();
      const url = db.url;
      const open = new pg.Pool({ connectionString: url, max: 2 });
      pool = open;
      const lite = sqliteOutput(path);
      const postgres: Output['reads'][number] = {
        label: 'PostgreSQL',
        database: url,
        read: async (relation, where = '') => (await sql(url, `SELECT * FROM public.${relation} ${where}`)) as Row[],
        digest: (runId) => digestAt({ kind: 'postgres', pool: open, schema: 'public' }, runId),
      };
      return {
        sinks: () => [toSqlite({ path }), toPostgres({ url, table: 'results' })],
        skip: async (runId, queries) => {
          await lite.skip(runId, queries);
          await postgresOutcomes(open, 'public', 'results').record(runId, skippedOutcomes(queries));
        },
        reads: [lite, postgres],
      };
    },
    async () => {
      await pool?.end();
      await db?.drop();
      dir?.[Symbol.dispose]();
    },
  );

  it('every view exports the same bytes from both, tracked_latest included', async () => {
    const [lite, postgres] = output().reads as [Output['reads'][number], Output['reads'][number]];
    using out = workdir();
    for (const report of ['rankings', 'domains', 'overlap', 'changes', 'tracked', 'tracked_latest'] as const) {
      await exportReport({ database: lite.database, report, format: 'csv', out: out.path(`s-${report}.csv`) });
      await exportReport({ database: postgres.database, report, format: 'csv', out: out.path(`p-${report}.csv`) });
      expect(readFileSync(out.path(`p-${report}.csv`), 'utf8'), report).toEqual(readFileSync(out.path(`s-${report}.csv`), 'utf8'));
    }
    expect(readFileSync(out.path('s-tracked_latest.csv'), 'utf8').split('\r\n')[0]).toBe('query,country,lang,domain,rank,searched,found,position,run_id,age_runs');
  });
});

it('a query file’s tag named age_runs is tag_age_runs in rankings, beside the view’s own age_runs', async () => {
  await using sim = await simulator({ seed: 42, day: 1 });
  using dir = workdir();
  writeFileSync(dir.path('queries.csv'), 'query,age_runs\r\nespresso,fresh\r\n');
  const path = dir.path('tagged.sqlite');
  const summary = await runOn(sim, { name: 'tagged', source: searchPages({ queriesFile: dir.path('queries.csv'), countries: ['us'], maxPages: 1 }), stages: [normalize()], sinks: [toSqlite({ path })] });
  expect(summary.status).toBe('completed');
  expect(sqliteRows(path, 'SELECT DISTINCT age_runs, tag_age_runs FROM report_rankings')).toEqual([{ age_runs: 0, tag_age_runs: 'fresh' }]);
});

describePostgres('PostgreSQL, a table of the longest name', () => {
  it('has report_tracked_latest too, though <table>_report_tracked_latest is longer than the 63 bytes PostgreSQL keeps: cut alike where it is made and where it is read', async () => {
    await using sim = await simulator({ seed: 42, day: 1 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const table = `t${'x'.repeat(MAX_POSTGRES_TABLE - 1)}`;
      const domains = trackedDomains(sim);
      const summary = await runOn(sim, pipeline([toPostgres({ url: db.url, table })], [ALWAYS], domains));
      expect(summary.status).toBe('completed');
      const views = await sql(db.url, `SELECT table_name FROM information_schema.views WHERE table_schema = 'public' ORDER BY table_name`);
      expect(views.map((v) => String(v.table_name).slice(table.length))).toEqual(expect.arrayContaining(['_report_tracked', '_report_tracked_latest'.slice(0, 63 - table.length)]));
      await exportReport({ database: db.url, report: 'tracked_latest', table, format: 'jsonl', out: dir.path('latest.jsonl') });
      const rows = readFileSync(dir.path('latest.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Row);
      expect(rows.map((r) => `${r.query} ${r.run_id} ${r.age_runs}`)).toEqual(COUNTRIES.flatMap(() => domains.map(() => `${ALWAYS} ${summary.runId} 0`)));
      const reader = await openReader(db.url);
      try {
        const data = await readReportData(reader, { table, maxQueries: 1, maxLines: 6, maxRuns: 50 });
        expect(data.tracked.map((t) => t.age)).toEqual(rows.map(() => 0));
      } finally {
        await reader.close();
      }
    } finally {
      await db.drop();
    }
  });
});
