// Where the credits went (docs/credits.md#where-the-credits-went): the spend ledger by key, pipeline and run, and the
// `webdata_spend` view over it, after real runs against the simulator — two pipelines sharing a state database, each
// sending with a pool of two keys — in SQLite and in PostgreSQL.
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPostgresSpendView } from '../../src/analytics/postgres-views.ts';
import { createSpendView } from '../../src/analytics/views.ts';
import { keyFingerprint } from '../../src/client/api-keys.ts';
import { run } from '../../src/index.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { spendDay } from '../../src/state/spend-day.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { noKeyIn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { allowanceSpend, debited, expectedAllowanceRows, KEYS, LATE, pipelineOf, POOL, poolSimulator, type Row } from './spend-fixture.ts';

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
