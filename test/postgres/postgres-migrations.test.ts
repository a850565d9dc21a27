import { expect, it } from 'vitest';
import pg from 'pg';
import { MIGRATIONS, migrate, POSTGRES_STATE_VERSION } from '../../src/state/postgres/schema.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { rejection } from '../helpers.ts';
import { describePostgres, spiedStatements, sql, testDatabase } from './pg.ts';

const tables = async (url: string) => (await sql(url, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'webdata' ORDER BY table_name`)).map((r) => r.table_name);

describePostgres('the PostgreSQL state schema and its migrations', () => {
  it('each migration applies on top of the one before it, from the first, and records its version', async () => {
    const db = await testDatabase();
    try {
      await sql(db.url, `CREATE SCHEMA webdata; CREATE TABLE webdata.schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
      for (const [index, migration] of MIGRATIONS.entries()) {
        await sql(db.url, migration('"webdata"'));
        await sql(db.url, `INSERT INTO webdata.schema_version (version) VALUES (${index + 1})`);
      }
      const stepByStep = await tables(db.url);
      // The same end as migrate() from nothing, which finds the version it left and does nothing more.
      const other = await testDatabase();
      const pool = new pg.Pool({ connectionString: other.url, max: 2 });
      try {
        expect(await migrate(pool, 'webdata', 'test')).toBe(0);
        expect(await tables(other.url)).toEqual(stepByStep);
        expect(await migrate(pool, 'webdata', 'test')).toBe(POSTGRES_STATE_VERSION);
        expect(await sql(other.url, 'SELECT version FROM webdata.schema_version ORDER BY version')).toEqual(MIGRATIONS.map((_, i) => ({ version: i + 1 })));
      } finally {
        await pool.end();
        await other.drop();
      }
    } finally {
      await db.drop();
    }
  });

  it('a schema of the last released version (3) is brought to this one: its runs are kept, without terms, until a resume records them; the spend ledger gains its uncommitted mark', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      await sql(db.url, `CREATE SCHEMA webdata; CREATE TABLE webdata.schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
      for (const [index, migration] of MIGRATIONS.slice(0, 3).entries()) {
        await sql(db.url, migration('"webdata"'));
        await sql(db.url, `INSERT INTO webdata.schema_version (version) VALUES (${index + 1})`);
      }
      await sql(db.url, `INSERT INTO webdata.runs (run_id, pipeline, status, started_at, fingerprint, plan, budget) VALUES ('r1', 'p', 'interrupted', now(), 'f', '{}', 20)`);
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      expect(await sql(db.url, 'SELECT max(version) AS v FROM webdata.schema_version')).toEqual([{ v: POSTGRES_STATE_VERSION }]);
      expect(await store.latestRun('p')).toMatchObject({ runId: 'r1', status: 'interrupted', budget: 20, terms: null });
      await store.reopenRun('r1', 20, { rate: 'unpaced' });
      expect((await store.latestRun('p'))?.terms).toEqual({ rate: 'unpaced' });
      await store.spend([{ runId: 'r1', at: new Date().toISOString(), seriesId: 's', path: '/p', attempt: 1, status: '200', credits: 1, uncertain: false, latencyMs: 1, uncommitted: true }]);
      expect(await store.spendOf('r1')).toMatchObject({ spent: 1, uncommitted: 1 });
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('processes starting together migrate once', async () => {
    const db = await testDatabase();
    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      const found = await Promise.all(pools.map((pool) => migrate(pool, 'webdata', 'test')));
      expect(found.filter((version) => version === 0)).toHaveLength(1);
      expect(await sql(db.url, 'SELECT count(*)::int AS n FROM webdata.schema_version')).toEqual([{ n: POSTGRES_STATE_VERSION }]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
      await db.drop();
    }
  });

  it('a store opening a schema already at this version reads its version once: no advisory lock, no transaction, no DDL', async () => {
    const db = await testDatabase();
    const first = new pg.Pool({ connectionString: db.url, max: 1 });
    const second = new pg.Pool({ connectionString: db.url, max: 2 });
    const sent = spiedStatements(second);
    try {
      await postgresStateStore(first, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      await postgresStateStore(second, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      expect(sent.filter((text) => /advisory|^\s*(BEGIN|CREATE|ALTER|DROP)\b/i.test(text))).toEqual([]);
      expect(sent.filter((text) => /schema_version/.test(text))).toHaveLength(1);
      // Nothing held by it in the server's lock table either, once it has opened.
      expect(await sql(db.url, `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'`)).toEqual([{ n: 0 }]);
    } finally {
      await Promise.all([first.end(), second.end()]);
      await db.drop();
    }
  });

  it('a schema of a newer webdata-etl is refused before anything in it changes', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      await migrate(pool, 'webdata', 'test');
      await sql(db.url, `INSERT INTO webdata.schema_version (version) VALUES (${POSTGRES_STATE_VERSION + 1})`);
      const before = await tables(db.url);
      const error = await rejection(migrate(pool, 'webdata', 'the database'));
      expect(error.name).toBe('ValidationError');
      expect(error.message).toMatch(new RegExp(`state\\.url: .*newer webdata-etl \\(state schema ${POSTGRES_STATE_VERSION + 1}; this one knows ${POSTGRES_STATE_VERSION}\\)`));
      expect(await tables(db.url)).toEqual(before);
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
