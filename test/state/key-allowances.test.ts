// Keys' allowances in the state store (src/state/allowance-store.ts), SQLite and PostgreSQL: declarations that bind
// every pipeline of the database, holds decided under a lock, spend rows that move their credits from a hold to the
// ledger, periods by the store's clock, and processes racing for the last credits of a period.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/open-database.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import type { HoldRequest } from '../../src/state/allowance-store.ts';
import type { StateStore } from '../../src/state/interfaces.ts';
import type { SpendRow } from '../../src/state/spend-store.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { spendRowOf } from './spend-rows.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DAY = { credits: 30, per: 'day', timezone: 'Europe/Berlin' } as const;

const request = (holder: string, want: number, overrides: Partial<HoldRequest> = {}): HoldRequest => ({
  fingerprint: 'fp-a',
  holder,
  pipeline: 'p',
  runId: 'run-1',
  want,
  ttlMs: 60_000,
  ...overrides,
});

/** A 2xx's spend row, its credits held under `holder` in `period`. */
const paid = (holder: string, period: string, credits = 1): SpendRow => spendRowOf({ credits, key: { fingerprint: 'fp-a', label: 'main', period, holder } });

/** What every store must do with declarations: one pipeline records, another agrees or is refused, none is bound. */
async function declares(store: StateStore): Promise<void> {
  const declaration = { fingerprint: 'fp-a', label: 'main', pipeline: 'a', allowance: DAY };
  expect(await store.declareAllowance({ ...declaration, allowance: null })).toEqual({ bound: null });
  const first = await store.declareAllowance(declaration);
  expect(first).toMatchObject({ bound: { ...DAY, pipeline: 'a', label: 'main' } });
  // Another pipeline declaring the same is bound by it (the record stays a's); one declaring none too.
  expect(await store.declareAllowance({ ...declaration, pipeline: 'b', label: 'other' })).toMatchObject({ bound: { pipeline: 'a', label: 'main' } });
  expect(await store.declareAllowance({ ...declaration, pipeline: 'c', allowance: null })).toMatchObject({ bound: { ...DAY, pipeline: 'a' } });
  // One zone under another name is the same allowance.
  expect(await store.declareAllowance({ ...declaration, pipeline: 'd', allowance: { ...DAY, timezone: 'europe/berlin' } })).toMatchObject({ bound: { ...DAY, pipeline: 'a' } });
  // Another allowance from another pipeline: refused, naming what stands; nothing changed.
  expect(await store.declareAllowance({ ...declaration, pipeline: 'b', allowance: { ...DAY, credits: 50 } })).toMatchObject({ conflict: { ...DAY, pipeline: 'a' } });
  expect(await store.declareAllowance({ ...declaration, pipeline: 'b', allowance: { ...DAY, per: 'month' } })).toMatchObject({ conflict: { pipeline: 'a' } });
  // The pipeline that recorded it may change it.
  expect(await store.declareAllowance({ ...declaration, allowance: { credits: 40, per: 'month', timezone: 'UTC' } })).toMatchObject({
    bound: { credits: 40, per: 'month', timezone: 'UTC', pipeline: 'a' },
  });
  expect(await store.declareAllowance({ ...declaration, pipeline: 'b', allowance: null })).toMatchObject({ bound: { credits: 40, per: 'month' } });
}

/** What every store must do with holds: no more than the allowance, spend moving out of holds, give back, release. */
async function holds(store: StateStore, period: string): Promise<void> {
  expect(await store.holdAllowance(request('h1', 5))).toBeUndefined();
  await store.declareAllowance({ fingerprint: 'fp-a', label: 'main', pipeline: 'p', allowance: DAY });
  const first = await store.holdAllowance(request('h1', 20));
  expect(first).toMatchObject({ granted: 20, spent: 0, held: 20, period: { key: period } });
  // Another process's hold: what is left, no more.
  expect(await store.holdAllowance(request('h2', 20))).toMatchObject({ granted: 10, spent: 0, held: 30 });
  expect(await store.holdAllowance(request('h2', 1))).toMatchObject({ granted: 0 });
  // Spend moves credits from h1's hold to the ledger: counted once, so still nothing left.
  await store.spend([paid('h1', period), paid('h1', period, 2)]);
  expect(await store.holdAllowance(request('h3', 1))).toMatchObject({ granted: 0, spent: 3, held: 27 });
  // Given back: free for another.
  await store.giveBackAllowance('fp-a', period, 'h1', 7);
  expect(await store.holdAllowance(request('h3', 10))).toMatchObject({ granted: 7, spent: 3, held: 27 });
  // A holder gone: its holds go, spent stays spent.
  await store.releaseAllowanceHolds('h2');
  expect(await store.holdAllowance(request('h3', 100))).toMatchObject({ granted: 10, spent: 3, held: 27 });
  await store.releaseAllowanceHolds('h1');
  await store.releaseAllowanceHolds('h3');
  expect(await store.holdAllowance(request('h4', 100))).toMatchObject({ granted: 27, spent: 3, held: 27 });
}

describe('keys’ allowances in a SQLite state file', () => {
  it('are declared once for every pipeline of the file: agreed with, refused when they differ, changed by their pipeline', async () => {
    using dir = workdir();
    const db = openDatabase(dir.path('state.sqlite'));
    try {
      await declares(sqliteStateStore(db));
    } finally {
      db.close();
    }
  });

  it('are held under the file’s write lock: never more than the allowance, spend moving out of holds, holds given back', async () => {
    using dir = workdir();
    const db = openDatabase(dir.path('state.sqlite'));
    // 2026-11-27 14:00 in Berlin, by the store's clock.
    const store = sqliteStateStore(db, { clock: () => Date.parse('2026-11-27T13:00:00.000Z') });
    try {
      await holds(store, '2026-11-27');
      expect(db.prepare(`SELECT sum(credits) AS spent, key_label AS label, pipeline, period FROM spend`).get()).toEqual({ spent: 3, label: 'main', pipeline: 'p', period: '2026-11-27' });
    } finally {
      db.close();
    }
  });

  it('a period by the store’s clock: the next day holds afresh; a hold its holder stopped renewing goes back', async () => {
    using dir = workdir();
    const db = openDatabase(dir.path('state.sqlite'));
    let now = Date.parse('2026-11-27T22:00:00.000Z');
    const store = sqliteStateStore(db, { clock: () => now });
    try {
      await store.declareAllowance({ fingerprint: 'fp-a', label: 'main', pipeline: 'p', allowance: DAY });
      expect(await store.holdAllowance(request('h1', 30, { ttlMs: 1_000 }))).toMatchObject({ granted: 30, period: { key: '2026-11-27' } });
      expect(await store.holdAllowance(request('h2', 1))).toMatchObject({ granted: 0 });
      // A minute later, the same day in Berlin: h1 renewed nothing, and its hold is no one's.
      now += 60_000;
      expect(await store.holdAllowance(request('h2', 30, { ttlMs: 1_000 }))).toMatchObject({ granted: 30, period: { key: '2026-11-27' } });
      // Renewed, a hold stands.
      await store.renewAllowanceHolds('h2', 60_000);
      now += 30_000;
      expect(await store.holdAllowance(request('h3', 1))).toMatchObject({ granted: 0, period: { key: '2026-11-27' } });
      // Midnight in Berlin: a period of its own.
      now = Date.parse('2026-11-27T23:00:00.000Z');
      expect(await store.holdAllowance(request('h3', 40))).toMatchObject({ granted: 30, spent: 0, period: { key: '2026-11-28', start: now } });
    } finally {
      db.close();
    }
  });

  it('processes racing for the last credits: the ledger never takes more than the allowance', async () => {
    using dir = workdir();
    const file = dir.path('state.sqlite');
    const db = openDatabase(file);
    await sqliteStateStore(db).declareAllowance({ fingerprint: 'fp-a', label: 'main', pipeline: 'p', allowance: DAY });
    db.close();
    const at = Date.now() + 3000;
    const results = await Promise.all(Array.from({ length: 4 }, (_, i) => racing(file, `h${i}`, at)));
    for (const result of results) expect(result.code, result.stderr).toBe(0);
    // Each wanted all 30: between them they spent 30, no more.
    expect(results.reduce((sum, result) => sum + Number(result.stdout), 0)).toBe(30);
    const check = new Database(file, { readonly: true });
    expect(check.prepare(`SELECT sum(credits) AS spent, count(*) AS n FROM spend`).get()).toEqual({ spent: 30, n: 30 });
    check.close();
  });
});

// Each process holds credits two at a time and spends them one row at a time, until a hold grants nothing.
const RACE = `
import { openDatabase } from './src/open-database.ts';
import { sqliteStateStore } from './src/state/sqlite/store.ts';
const [file, holder, at] = process.argv.slice(1);
while (Date.now() < Number(at));
const db = openDatabase(file);
const store = sqliteStateStore(db);
let spent = 0;
for (;;) {
  const hold = await store.holdAllowance({ fingerprint: 'fp-a', holder, pipeline: 'p', runId: 'r', want: 2, ttlMs: 60000 });
  if (!hold || hold.granted === 0) break;
  for (let i = 0; i < hold.granted; i++) {
    await store.spend([{ runId: 'r', at: new Date().toISOString(), seriesId: holder, path: '/p', attempt: 1, status: '200', credits: 1, uncertain: false, latencyMs: 1, pipeline: 'p', key: { fingerprint: 'fp-a', label: 'main', period: hold.period.key, holder } }]);
    spent += 1;
  }
}
await store.releaseAllowanceHolds(holder);
process.stdout.write(String(spent));
db.close();
`;

async function racing(file: string, holder: string, at: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', RACE, file, holder, String(at)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

describePostgres('keys’ allowances in PostgreSQL', () => {
  it('are declared once for every pipeline of the schema: agreed with, refused when they differ, changed by their pipeline', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      await declares(await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' }));
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('are held under the key’s row lock, by the server’s clock: never more than the allowance, spend moving out of holds', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      const [{ day }] = (await sql(db.url, `SELECT to_char(now() AT TIME ZONE 'Europe/Berlin', 'YYYY-MM-DD') AS day`)) as [{ day: string }];
      await holds(store, day);
      expect(await sql(db.url, `SELECT sum(credits)::int AS spent, min(key_label) AS label, min(pipeline) AS pipeline, min(period) AS period FROM webdata.spend`)).toEqual([
        { spent: 3, label: 'main', pipeline: 'p', period: day },
      ]);
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('a hold its holder stopped renewing goes back; pools racing for the last credits never take more than the allowance', async () => {
    const db = await testDatabase();
    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      const stores = await Promise.all(pools.map((pool, i) => postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: `p${i}` })));
      const [first, second] = stores as unknown as [StateStore, StateStore];
      await first.declareAllowance({ fingerprint: 'fp-a', label: 'main', pipeline: 'p0', allowance: DAY });
      // Expired as it is made: the next holder takes it back.
      expect(await first.holdAllowance(request('gone', 30, { ttlMs: -1 }))).toMatchObject({ granted: 30 });
      expect(await second.holdAllowance(request('h-probe', 1))).toMatchObject({ granted: 1 });
      await second.releaseAllowanceHolds('h-probe');
      const spent = await Promise.all(
        stores.map(async (store, i) => {
          let mine = 0;
          for (;;) {
            const hold = await store.holdAllowance(request(`h${i}`, 2, { pipeline: `p${i}` }));
            if (!hold || hold.granted === 0) break;
            for (let n = 0; n < hold.granted; n++) await store.spend([paid(`h${i}`, hold.period.key)]);
            mine += hold.granted;
          }
          await store.releaseAllowanceHolds(`h${i}`);
          return mine;
        }),
      );
      expect(spent.reduce((sum, n) => sum + n, 0)).toBe(30);
      expect(await sql(db.url, `SELECT sum(credits)::int AS spent FROM webdata.spend`)).toEqual([{ spent: 30 }]);
    } finally {
      for (const pool of pools) await pool.end();
      await db.drop();
    }
  });
});
