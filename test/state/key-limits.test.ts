// The state store's memory of keys' limits (src/state/limit-store.ts), SQLite and PostgreSQL: the database's secret for
// keys' fingerprints, made once however many processes ask at the same moment, and what keys learned, by fingerprint
// and API.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/open-database.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import type { LimitStore } from '../../src/state/limit-store.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Each process loads what it needs, then waits for the same instant (argv[2]) to open the file and ask for the secret.
const ASK = `
import { openDatabase } from './src/open-database.ts';
import { sqliteStateStore } from './src/state/sqlite/store.ts';
const at = Number(process.argv[2]);
while (Date.now() < at);
const db = openDatabase(process.argv[1]);
const secret = await sqliteStateStore(db).keySecret();
process.stdout.write(Buffer.from(secret).toString('hex'));
db.close();
`;

async function asking(file: string, at: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', ASK, file, String(at)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/** What every store must do with limits: remembered by fingerprint and API, replaced by what is learned later. */
async function remembersLimits(store: LimitStore): Promise<void> {
  const secret = await store.keySecret();
  expect(secret).toHaveLength(32);
  expect(Buffer.from(await store.keySecret()).equals(Buffer.from(secret))).toBe(true);
  const api = 'https://api.example.com/api/v1';
  expect(await store.rememberedLimits(api, ['fa', 'fb'])).toEqual([]);
  await store.rememberLimits([
    { fingerprint: 'fa', api, rate: 9.5, above: 10.2, learnedAt: '2026-11-01T10:00:00.000Z' },
    { fingerprint: 'fb', api: 'http://127.0.0.1:9/api/v1', rate: 3, above: null, learnedAt: '2026-11-01T10:00:00.000Z' },
  ]);
  expect(await store.rememberedLimits(api, ['fa', 'fb'])).toEqual([{ fingerprint: 'fa', api, rate: 9.5, above: 10.2, learnedAt: '2026-11-01T10:00:00.000Z' }]);
  await store.rememberLimits([{ fingerprint: 'fa', api, rate: 7, above: 7.5, learnedAt: '2026-11-02T10:00:00.000Z' }]);
  expect(await store.rememberedLimits(api, ['fa'])).toEqual([{ fingerprint: 'fa', api, rate: 7, above: 7.5, learnedAt: '2026-11-02T10:00:00.000Z' }]);
  await store.rememberLimits([]);
}

describe('keys’ limits in a SQLite state file', () => {
  it('are remembered by fingerprint and API, and replaced by what is learned later', async () => {
    using dir = workdir();
    const db = openDatabase(dir.path('state.sqlite'));
    try {
      await remembersLimits(sqliteStateStore(db));
    } finally {
      db.close();
    }
  });

  it('the file’s secret is made once: processes asking together for it on a new file all get the one that stands', async () => {
    using dir = workdir();
    for (let round = 0; round < 3; round++) {
      const file = join(dir.dir, `state-${round}.sqlite`);
      // Far enough ahead for every process to have loaded (a bound, not a guess at timing: one late only asks later).
      const at = Date.now() + 3000;
      const results = await Promise.all(Array.from({ length: 6 }, () => asking(file, at)));
      for (const result of results) expect(result.code, result.stderr).toBe(0);
      expect(new Set(results.map((result) => result.stdout)).size).toBe(1);
      expect(results[0]?.stdout).toMatch(/^[0-9a-f]{64}$/);
      expect(sqliteRows(file, `SELECT count(*) AS n FROM webdata_meta WHERE key = 'key_secret'`)).toEqual([{ n: 1 }]);
    }
  });
});

describePostgres('keys’ limits in PostgreSQL', () => {
  it('are remembered by fingerprint and API, and replaced by what is learned later', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      await remembersLimits(await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' }));
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('the schema’s secret is made once: stores of several pools asking together all get the one that stands', async () => {
    const db = await testDatabase();
    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      const stores = await Promise.all(pools.map((pool, i) => postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: `p${i}` })));
      // Each asks at once on its own connection: their inserts race on the key.
      const secrets = await Promise.all(stores.map((store) => store.keySecret()));
      expect(new Set(secrets.map((secret) => Buffer.from(secret).toString('hex'))).size).toBe(1);
      expect(await sql(db.url, `SELECT count(*)::int AS n FROM webdata.meta WHERE key = 'key_secret'`)).toEqual([{ n: 1 }]);
    } finally {
      for (const pool of pools) await pool.end();
      await db.drop();
    }
  });
});
