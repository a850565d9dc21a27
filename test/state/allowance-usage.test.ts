// What a key's period has taken, read without holding (AllowanceStore.allowanceUsage, src/state/allowance-store.ts), in
// SQLite and PostgreSQL: every pipeline's spend in the period, what live holds hold (expired ones left out), and what
// one run spent since an instant — a spread allowance's share counts it (src/run/allowance-shares.ts).
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/open-database.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import type { StateStore } from '../../src/state/interfaces.ts';
import type { SpendRow } from '../../src/state/spend-store.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { spendRowOf } from './spend-rows.ts';

const row = (runId: string, at: string, credits: number, period: string): SpendRow =>
  spendRowOf({ runId, at, credits, key: { fingerprint: 'fp-u', label: 'main', period, holder: null } });

/** `day`: the period the store's clock is in (a day in UTC). */
async function usage(store: StateStore, day: string): Promise<void> {
  await store.declareAllowance({ fingerprint: 'fp-u', label: 'main', pipeline: 'p', allowance: { credits: 50, per: 'day', timezone: 'UTC' } });
  expect(await store.allowanceUsage({ fingerprint: 'fp-u', period: day, runId: 'run-1', since: `${day}T00:00:00.000Z` })).toEqual({ spent: 0, held: 0, runSpent: 0 });
  await store.spend([row('run-1', `${day}T10:00:00.000Z`, 2, day), row('run-1', `${day}T12:00:00.000Z`, 3, day), row('run-2', `${day}T11:00:00.000Z`, 4, day), row('run-1', `${day}T12:30:00.000Z`, 7, '1999-01-01')]);
  // A live hold counts; one whose holder stopped renewing it does not.
  await store.holdAllowance({ fingerprint: 'fp-u', holder: 'live', pipeline: 'p', runId: 'run-3', want: 5, ttlMs: 60_000 });
  await store.holdAllowance({ fingerprint: 'fp-u', holder: 'gone', pipeline: 'p', runId: 'run-4', want: 6, ttlMs: -1000 });
  expect(await store.allowanceUsage({ fingerprint: 'fp-u', period: day, runId: 'run-1', since: `${day}T00:00:00.000Z` })).toEqual({ spent: 9, held: 5, runSpent: 5 });
  // Since 11:00: run-1's row of 12:00 alone (its row of another period never).
  expect(await store.allowanceUsage({ fingerprint: 'fp-u', period: day, runId: 'run-1', since: `${day}T11:00:00.000Z` })).toEqual({ spent: 9, held: 5, runSpent: 3 });
  expect(await store.allowanceUsage({ fingerprint: 'fp-u', period: day, runId: 'run-2', since: `${day}T11:00:00.000Z` })).toEqual({ spent: 9, held: 5, runSpent: 4 });
  expect(await store.allowanceUsage({ fingerprint: 'fp-other', period: day, runId: 'run-1', since: `${day}T00:00:00.000Z` })).toEqual({ spent: 0, held: 0, runSpent: 0 });
}

describe("a key's period read without holding", () => {
  it('in SQLite, by the store’s clock', async () => {
    using dir = workdir();
    const db = openDatabase(dir.path('state.sqlite'));
    try {
      await usage(sqliteStateStore(db, { clock: () => Date.parse('2026-11-27T13:00:00.000Z') }), '2026-11-27');
    } finally {
      db.close();
    }
    // Read, nothing held: the two holds the test made, no more.
    const check = new Database(dir.path('state.sqlite'), { readonly: true });
    expect(check.prepare('SELECT count(*) AS n FROM key_holds').get()).toEqual({ n: 2 });
    check.close();
  });
});

describePostgres("a key's period read without holding, in PostgreSQL", () => {
  it('by the server’s clock', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      const [{ day }] = (await sql(db.url, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day`)) as [{ day: string }];
      await usage(store, day);
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
