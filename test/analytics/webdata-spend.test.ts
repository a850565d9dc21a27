// Where the credits went (docs/credits.md#where-the-credits-went): the spend ledger by key, pipeline and run, and the
// `webdata_spend` view over it, after real runs against the simulator — two pipelines sharing a state database, each
// sending with a pool of two keys — in SQLite and in PostgreSQL.
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPostgresSpendView } from '../../src/analytics/postgres-views.ts';
import { createSpendView } from '../../src/analytics/views.ts';
import { keyFingerprint } from '../../src/client/api-keys.ts';
import { normalize, run, searchPages, toCsv } from '../../src/index.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import type { StateStore } from '../../src/state/interfaces.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { spendDay } from '../../src/state/spend-day.ts';
import type { SpendRow } from '../../src/state/spend-store.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { noKeyIn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

export const KEYS = { north: 'sk_north_4f3e2d1c0b9a8f7e6d', south: 'sk_south_0a9b8c7d6e5f4a3b2c' };
export const POOL = `north=${KEYS.north},south=${KEYS.south}`;

/** A simulator that knows both keys (each its own name, so that it counts each one's credits). */
export function poolSimulator() {
  return startSimulator({ keys: [{ key: KEYS.north, name: 'north' }, { key: KEYS.south, name: 'south' }] });
}

/** A pipeline of its own name and queries, whose state is `state` (a SQLite file, or PostgreSQL's `state.url`). */
export function pipelineOf(name: string, dir: string, state: { path: string } | { url: string }, queries: string[]) {
  return {
    name,
    source: searchPages({ queries, countries: ['us', 'gb'], maxPages: 2 }),
    stages: [normalize()],
    sinks: [toCsv({ path: `${dir}/${name}.csv` })],
    rate: { concurrency: 2 },
    state,
  };
}

/** The simulator's own count of credits debited, by key name. */
export function debited(sim: { stats(): { credits: Record<string, { debited: number }> } }): Record<string, number> {
  return Object.fromEntries(Object.entries(sim.stats().credits).map(([name, { debited }]) => [name, debited]));
}

describe('the spend ledger by key and pipeline (SQLite state)', () => {
  it("every row names its pipeline and its key's label and fingerprint (never the key); credits per label are the simulator's", async () => {
    await using sim = await poolSimulator();
    using dir = workdir();
    const state = { path: dir.path('state.sqlite') };
    const summary = await run(pipelineOf('alpha', dir.dir, state, ['espresso', 'kettle', 'grinder']), { baseUrl: sim.url, env: { WEBDATA_API_KEYS: POOL } });
    expect(summary.status).toBe('completed');
    const rows = sqliteRows(state.path, 'SELECT pipeline, key_label, key_fingerprint, SUM(credits) AS credits FROM spend GROUP BY pipeline, key_label, key_fingerprint ORDER BY key_label');
    expect(rows.map((row) => [row.pipeline, row.key_label, row.credits])).toEqual([
      ['alpha', 'north', debited(sim).north],
      ['alpha', 'south', debited(sim).south],
    ]);
    // A keyed hash under the file's secret: 22 base64url characters, one per key, neither key in it.
    for (const row of rows) expect(row.key_fingerprint).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(new Set(rows.map((row) => row.key_fingerprint)).size).toBe(2);
  });
});

type Row = Record<string, unknown>;

/**
 * Two pipelines, each run once with the pool of two keys, on one state database: what the simulator debited each key
 * in each pipeline's run (its own count), the runs' days (UTC: the keys have no allowance), and the pipelines' names.
 */
async function twoPipelines(state: (name: string) => { path: string } | { url: string }, dir: string) {
  await using sim = await poolSimulator();
  const before = new Date().toISOString();
  const paid: Record<string, Record<string, number>> = {};
  for (const [name, queries] of [
    ['alpha', ['espresso', 'kettle', 'grinder']],
    ['beta', ['scale', 'tamper']],
  ] as const) {
    const was = debited(sim);
    const summary = await run(pipelineOf(name, dir, state(name), [...queries]), { baseUrl: sim.url, env: { WEBDATA_API_KEYS: POOL } });
    expect(summary.status).toBe('completed');
    const now = debited(sim);
    paid[name] = Object.fromEntries(Object.keys(now).map((key) => [key, (now[key] ?? 0) - (was[key] ?? 0)]));
  }
  // The days the runs spent on (two, should they straddle midnight UTC).
  const days = new Set([before.slice(0, 10), new Date().toISOString().slice(0, 10)]);
  return { paid, days };
}

/** The view's credits and requests by pipeline and key label, and what its rows hold besides. */
function byPipelineAndKey(rows: readonly Row[]) {
  const sums: Record<string, Record<string, number>> = {};
  for (const row of rows) {
    const pipeline = String(row.pipeline);
    const label = String(row.key_label);
    (sums[pipeline] ??= {})[label] = (sums[pipeline]?.[label] ?? 0) + Number(row.credits);
  }
  return sums;
}

/** What every store's webdata_spend must say after the two pipelines' runs. */
function saysWhereTheCreditsWent(rows: readonly Row[], runs: Awaited<ReturnType<typeof twoPipelines>>, secret: Buffer): void {
  // Every credit the simulator debited, by the pipeline that spent it and the label of the key it went with.
  expect(byPipelineAndKey(rows)).toEqual(runs.paid);
  for (const row of rows) {
    expect(runs.days.has(String(row.day)), String(row.day)).toBe(true);
    // A label for people, and the key's fingerprint under the database's secret: never the key.
    expect(row.key_fingerprint).toBe(keyFingerprint(KEYS[row.key_label as keyof typeof KEYS], secret));
    expect(Number(row.requests)).toBeGreaterThanOrEqual(Number(row.credits));
    expect(row.run_id).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    // No allowance: none of its columns.
    expect([row.allowance_credits, row.allowance_per, row.allowance_timezone, row.period, row.period_spent, row.period_held, row.period_left]).toEqual([null, null, null, null, null, null, null]);
  }
  // Each pipeline ran once: one run each.
  expect(new Set(rows.filter((row) => row.pipeline === 'alpha').map((row) => row.run_id)).size).toBe(1);
  expect(new Set(rows.filter((row) => row.pipeline === 'beta').map((row) => row.run_id)).size).toBe(1);
}

describe('webdata_spend in a SQLite state file', () => {
  it("two pipelines sharing it, two keys of a pool: credits by pipeline and key label add up to the simulator's count", async () => {
    using dir = workdir();
    const state = dir.path('shared.sqlite');
    const runs = await twoPipelines(() => ({ path: state }), dir.dir);
    const rows = sqliteRows(state, 'SELECT * FROM webdata_spend ORDER BY pipeline, key_label');
    const secret = Buffer.from(String(sqliteRows(state, "SELECT value FROM webdata_meta WHERE key = 'key_secret'")[0]?.value), 'base64url');
    saysWhereTheCreditsWent(rows, runs, secret);
    noKeyIn(dir.dir, '', Object.values(KEYS));
  });
});

describePostgres('webdata_spend in a PostgreSQL state schema', () => {
  it("two pipelines sharing it, two keys of a pool: credits by pipeline and key label add up to the simulator's count", async () => {
    using dir = workdir();
    const db = await testDatabase();
    try {
      const runs = await twoPipelines(() => ({ url: db.url }), dir.dir);
      const rows = await sql(db.url, 'SELECT * FROM webdata.webdata_spend ORDER BY pipeline, key_label');
      const [secret] = await sql(db.url, "SELECT value FROM webdata.meta WHERE key = 'key_secret'");
      saysWhereTheCreditsWent(rows, runs, Buffer.from(String(secret?.value), 'base64url'));
      noKeyIn(dir.dir, '', Object.values(KEYS));
    } finally {
      await db.drop();
    }
  });
});

/** 23:30 UTC on 26 November: the 27th in Berlin. */
const LATE = '2026-11-26T23:30:00.000Z';

const spendRow = (runId: string, pipeline: string | undefined, key: SpendRow['key'], credits: number, at = LATE): SpendRow => ({
  runId,
  at,
  seriesId: 's',
  path: '/searchengine/search',
  attempt: 1,
  status: '200',
  credits,
  uncertain: false,
  latencyMs: 1,
  ...(pipeline === undefined ? {} : { pipeline }),
  key,
});

/**
 * Spend written through the store as runs write it, a key's allowance and holds: `north`, 100 credits a day in Berlin,
 * spent by alpha (as `north`) and beta (which labels the same key `n2`) in the period the store's clock is in, and in
 * an earlier one; `south`, without an allowance; and a row of a run from before the ledger named pipelines and keys.
 * `expiredHold` writes a hold its holder stopped renewing, which counts for nothing. Resolves to today's period.
 */
async function allowanceSpend(store: StateStore, expiredHold: (period: string) => Promise<void>): Promise<string> {
  const north = { fingerprint: 'fp-north', label: 'north' };
  await store.declareAllowance({ ...north, pipeline: 'alpha', allowance: { credits: 100, per: 'day', timezone: 'Europe/Berlin' } });
  const h1 = await store.holdAllowance({ fingerprint: 'fp-north', holder: 'h1', pipeline: 'alpha', runId: 'run-a', want: 20, ttlMs: 600_000 });
  const period = h1?.period.key as string;
  await store.spend([1, 1, 1].map((credits) => spendRow('run-a', 'alpha', { ...north, period, holder: 'h1' }, credits)));
  await store.holdAllowance({ fingerprint: 'fp-north', holder: 'h2', pipeline: 'beta', runId: 'run-b', want: 10, ttlMs: 600_000 });
  await store.spend([2, 2].map((credits) => spendRow('run-b', 'beta', { fingerprint: 'fp-north', label: 'n2', period, holder: 'h2' }, credits)));
  await store.spend([spendRow('run-a', 'alpha', { ...north, period: '2026-01-01', holder: null }, 5, '2026-01-01T10:00:00.000Z')]);
  await store.spend([spendRow('run-a', 'alpha', { fingerprint: 'fp-south', label: 'south', period: null, holder: null }, 4)]);
  await store.startRun({ runId: 'run-old', pipeline: 'legacy', startedAt: LATE, fingerprint: 'f', plan: {}, budget: null });
  await store.spend([spendRow('run-old', undefined, undefined, 1)]);
  await expiredHold(period);
  return period;
}

/** What webdata_spend says of `allowanceSpend`'s rows. */
function expectedAllowanceRows(period: string): Row[] {
  const north = { allowance_credits: 100, allowance_per: 'day', allowance_timezone: 'Europe/Berlin' };
  const none = { allowance_credits: null, allowance_per: null, allowance_timezone: null, period: null, period_spent: null, period_held: null, period_left: null };
  // Today: 3 + 4 spent by the two pipelines; held, 17 of h1's 20 and 6 of h2's 10; left, 100 - 7 - 23.
  const today = { ...north, period, period_spent: 7, period_held: 23, period_left: 70 };
  const row = (pipeline: string | null, label: string | null, fingerprint: string | null, day: string, runId: string, requests: number, credits: number) => ({
    day,
    key_label: label,
    key_fingerprint: fingerprint,
    pipeline,
    run_id: runId,
    requests,
    answered: requests,
    credits,
    uncertain_credits: 0,
  });
  return [
    { ...row('alpha', 'north', 'fp-north', '2026-01-01', 'run-a', 1, 5), ...north, period: '2026-01-01', period_spent: 5, period_held: 0, period_left: 95 },
    { ...row('alpha', 'north', 'fp-north', '2026-11-27', 'run-a', 3, 3), ...today },
    { ...row('alpha', 'south', 'fp-south', '2026-11-26', 'run-a', 1, 4), ...none },
    { ...row('beta', 'n2', 'fp-north', '2026-11-27', 'run-b', 2, 4), ...today },
    // Its pipeline is its run's; its day UTC's.
    { ...row('legacy', null, null, '2026-11-26', 'run-old', 1, 1), ...none },
  ];
}

const ORDER = 'ORDER BY pipeline, key_label, day';

describe('webdata_spend: allowances, periods, holds', () => {
  it('SQLite: the allowance, what the period took (every pipeline’s, under any label), what is held and what is left', async () => {
    using dir = workdir();
    const db = new Database(dir.path('state.sqlite'));
    try {
      const store = sqliteStateStore(db);
      createSpendView(db);
      const period = await allowanceSpend(store, async (period) => {
        db.prepare(`INSERT INTO key_holds (fingerprint, period, holder, pipeline, run_id, credits, expires_at) VALUES ('fp-north', ?, 'gone', 'gamma', 'run-g', 50, 0)`).run(period);
      });
      expect(spendDay(LATE, 'Europe/Berlin')).toBe('2026-11-27');
      expect(db.prepare(`SELECT * FROM webdata_spend ${ORDER}`).all()).toEqual(expectedAllowanceRows(period));
    } finally {
      db.close();
    }
  });
});

describePostgres('webdata_spend: allowances, periods, holds (PostgreSQL)', () => {
  it('the same rows and figures as SQLite’s', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'alpha' });
      await createPostgresSpendView(pool, 'webdata');
      const period = await allowanceSpend(store, async (period) => {
        await pool.query(`INSERT INTO webdata.key_holds (fingerprint, period, holder, pipeline, run_id, credits, expires_at) VALUES ('fp-north', $1, 'gone', 'gamma', 'run-g', 50, now() - interval '1 hour')`, [period]);
      });
      expect((await pool.query(`SELECT * FROM webdata.webdata_spend ${ORDER}`)).rows).toEqual(expectedAllowanceRows(period));
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
