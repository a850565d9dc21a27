// The day each request's spend falls on (SQLite state schema 8, PostgreSQL migration 11): on the clocks of its key's
// allowance, else UTC's, written with the row by both stores alike, so that webdata_spend groups by one day whichever
// database holds it (docs/credits.md#where-the-credits-went).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresTarget } from '../../src/postgres/target.ts';
import type { StateStore } from '../../src/state/interfaces.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { spendDay } from '../../src/state/spend-day.ts';
import type { SpendRow } from '../../src/state/spend-store.ts';
import { STATE_SCHEMA_VERSION } from '../../src/state/sqlite/schema.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';
import { spendRowOf } from './spend-rows.ts';

/** 23:30 UTC on 26 November: already the 27th in Berlin, still the 26th in New York and in UTC. */
const LATE = '2026-11-26T23:30:00.000Z';

const row = (key: SpendRow['key'], at = LATE): SpendRow => spendRowOf({ key, at });

describe('a spend row’s day', () => {
  it('is its date on the clocks of the zone given, else UTC’s; none for a time that is not one', () => {
    expect(spendDay(LATE, 'Europe/Berlin')).toBe('2026-11-27');
    expect(spendDay(LATE, 'America/New_York')).toBe('2026-11-26');
    expect(spendDay(LATE, undefined)).toBe('2026-11-26');
    expect(spendDay(LATE, null)).toBe('2026-11-26');
    // Kathmandu is 5:45 ahead: 18:20 UTC is five past midnight there.
    expect(spendDay('2026-11-26T18:20:00.000Z', 'Asia/Kathmandu')).toBe('2026-11-27');
    expect(spendDay('2026-11-26T18:10:00.000Z', 'Asia/Kathmandu')).toBe('2026-11-26');
    // The last of a year and a leap day.
    expect(spendDay('2026-12-31T23:59:59.999Z', 'UTC')).toBe('2026-12-31');
    expect(spendDay('2028-02-29T12:00:00.000Z', 'Pacific/Auckland')).toBe('2028-03-01');
    expect(spendDay('not a time', 'UTC')).toBeNull();
    expect(spendDay(LATE, 'Mars/Olympus_Mons')).toBeNull();
  });
});

/** Spend of a key with an allowance in Berlin, of a key without one, and of no key: the days each store writes. */
async function writesDays(store: StateStore, days: () => Promise<unknown[]>): Promise<void> {
  await store.declareAllowance({ fingerprint: 'fp-berlin', label: 'berlin', pipeline: 'p', allowance: { credits: 100, per: 'month', timezone: 'Europe/Berlin' } });
  await store.spend([
    row({ fingerprint: 'fp-berlin', label: 'berlin', period: null, holder: null }),
    row({ fingerprint: 'fp-plain', label: 'plain', period: null, holder: null }),
    row(undefined),
    row({ fingerprint: 'fp-berlin', label: 'berlin', period: null, holder: null }, '2026-11-26T12:00:00.000Z'),
  ]);
  expect(await days()).toEqual([
    { key_label: 'berlin', day: '2026-11-27' },
    { key_label: 'plain', day: '2026-11-26' },
    { key_label: null, day: '2026-11-26' },
    { key_label: 'berlin', day: '2026-11-26' },
  ]);
}

describe('the day each store writes', () => {
  it('SQLite: on the clocks of the key’s allowance, else UTC’s', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webdata-store-'));
    const db = new Database(join(dir, 'state.db'));
    try {
      await writesDays(sqliteStateStore(db), async () => db.prepare('SELECT key_label, day FROM spend ORDER BY id').all());
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a SQLite state file of schema 7 gains the ledger’s day (null in its rows) and is marked 8', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webdata-store-'));
    try {
      const db = new Database(join(dir, 'state.db'));
      const store = sqliteStateStore(db);
      await store.spend([row({ fingerprint: 'fp', label: 'fast', period: null, holder: null })]);
      // As schema 7 left it: the spend table without its day.
      db.exec(`ALTER TABLE spend DROP COLUMN day; UPDATE webdata_meta SET value = '7' WHERE key = 'state_schema'`);
      db.close();
      const again = new Database(join(dir, 'state.db'));
      const reopened = sqliteStateStore(again);
      expect(STATE_SCHEMA_VERSION).toBe(8);
      expect(again.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get()).toBe('8');
      await reopened.spend([row({ fingerprint: 'fp', label: 'fast', period: null, holder: null })]);
      expect(again.prepare('SELECT key_label, day FROM spend ORDER BY id').all()).toEqual([
        { key_label: 'fast', day: null },
        { key_label: 'fast', day: '2026-11-26' },
      ]);
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describePostgres('the day PostgreSQL’s store writes', () => {
  it('the same as SQLite’s: on the clocks of the key’s allowance, else UTC’s', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      await writesDays(store, async () => (await pool.query('SELECT key_label, day FROM webdata.spend ORDER BY id')).rows);
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
