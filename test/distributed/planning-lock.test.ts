import pg from 'pg';
import { expect, it } from 'vitest';
import { bossSchema, openBoss } from '../../src/distributed/boss.ts';
import { postgresHosting } from '../../src/distributed/join.ts';
import { planningLock } from '../../src/distributed/plan-run.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

// The planning lock (src/distributed/plan-run.ts): processes that join a run at work go in side by side, a planner
// goes in alone, and a planner never plans while a process that saw a worker at work is on its way in. Each test waits
// for what it can observe — a lock taken, or a session waiting in pg_locks — never a guessed time.

type Decided = { joining: boolean };

/** Settles to 'taken' when `taking` resolves, or 'waiting' once a session waits for an advisory lock (pg_locks). */
async function takenOrWaiting(url: string, taking: Promise<unknown>): Promise<'taken' | 'waiting'> {
  let taken = false;
  void taking.then(() => (taken = true));
  for (;;) {
    if (taken) return 'taken';
    const rows = await sql(url, `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`);
    if (rows.length > 0 && !taken) return 'waiting';
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describePostgres('the planning lock: joiners side by side, a planner alone', () => {
  it('two processes joining a run at work hold it at once; a third that would plan waits for both, then looks again', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      const joiner = async () => ({ joining: true });
      const first = await planningLock(store, 'p', joiner);
      // Before the change the second waited here for the first to register and let go (joiners one after another).
      const second = planningLock(store, 'p', joiner);
      expect(await takenOrWaiting(db.url, second)).toBe('taken');
      expect((await second).decided).toEqual({ joining: true });

      // A process that finds no worker at work (say the ones the joiners saw just left) would plan: it waits for
      // the joiners on their way in, and decides again once they are in (now it joins them).
      const looks: Decided[] = [];
      let registered = false;
      const planner = planningLock(store, 'p', async () => {
        const decided = { joining: registered };
        looks.push(decided);
        return decided;
      });
      expect(await takenOrWaiting(db.url, planner)).toBe('waiting');
      registered = true;
      await first.lock.release();
      expect(await takenOrWaiting(db.url, planner)).toBe('waiting');
      await (await second).lock.release();
      const planned = await planner;
      expect(looks).toEqual([{ joining: false }, { joining: true }]);
      expect(planned.decided).toEqual({ joining: true });
      await planned.lock.release();
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('a planner holds it alone until it lets go: a process starting meanwhile looks only after, and so sees the planned run', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      let planned = false;
      const look = async () => ({ joining: planned });
      const planner = await planningLock(store, 'p', look);
      expect(planner.decided).toEqual({ joining: false });
      const next = planningLock(store, 'p', look);
      expect(await takenOrWaiting(db.url, next)).toBe('waiting');
      planned = true;
      await planner.lock.release();
      expect((await next).decided).toEqual({ joining: true });
      // Another pipeline's lock is its own.
      const other = planningLock(store, 'q', async () => ({ joining: false }));
      expect(await takenOrWaiting(db.url, other)).toBe('taken');
      await (await other).lock.release();
      await (await next).lock.release();
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('a process waits for a planner that plans for longer than a statement may take: its wait, cut by the timeout, is asked again', async () => {
    // At a million series on a busy server, planning took 270 s: every process waiting to join failed at the
    // statement timeout (60 s), exit 1. Here the timeout is 300 ms, and the planner holds the lock past it.
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 4, statement_timeout: 300 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      let planned = false;
      const look = async () => ({ joining: planned });
      const planner = await planningLock(store, 'p', look);
      let failed: unknown;
      const next = planningLock(store, 'p', look);
      next.catch((error: unknown) => (failed = error));
      expect(await takenOrWaiting(db.url, next)).toBe('waiting');
      // The waiting session's statement started once, was cancelled by the timeout, and started again (a later
      // query_start, still waiting). Before, the wait failed at the first timeout.
      const waitingSince = async () =>
        (await sql(db.url, `SELECT query_start::text AS at FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%pg_advisory_lock%'`)).map((row) => String(row.at));
      const first = await waitingSince();
      expect(first).toHaveLength(1);
      for (let looks = 0; ; looks += 1) {
        expect(failed).toBeUndefined();
        const now = await waitingSince();
        if (now.length === 1 && now[0] !== first[0]) break;
        expect(looks).toBeLessThan(500);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      planned = true;
      await planner.lock.release();
      expect((await next).decided).toEqual({ joining: true });
      await (await next).lock.release();
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('a process waiting for the planning lock starts pg-boss meanwhile (its schema made), and stops it if the run ends before it is a worker', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      // Another process plans: it holds the lock, and has not started pg-boss (the new database has no job schema).
      const planner = await planningLock(store, 'p', async () => ({ joining: false }));
      const hosting = postgresHosting(store);
      const waiting = hosting.hold('p', async () => ({ joining: true }));
      expect(await takenOrWaiting(db.url, waiting)).toBe('waiting');
      // Before the change, pg-boss started only once the lock was had (join.ts): its schema waited for the planner.
      const installed = `SELECT 1 FROM pg_tables WHERE schemaname = '${bossSchema('webdata')}' AND tablename = 'version'`;
      for (let tries = 0; (await sql(db.url, installed)).length === 0; tries++) {
        if (tries > 250) throw new Error('pg-boss was not started while the process waited for the planning lock');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(await takenOrWaiting(db.url, waiting)).toBe('waiting');
      await planner.lock.release();
      const held = await waiting;
      expect(held.decided).toEqual({ joining: true });
      // The run ends here, before a host took pg-boss (a refused joiner, say): letting go of the lock stops it.
      await held.lock.release();
      await pool.end();
    } finally {
      await pool.end().catch(() => undefined);
      await db.drop();
    }
  });

  it('processes install pg-boss on a new database one at a time: one waits for the install before it, then finds it installed', async () => {
    // Started as they wait for the planning lock, three workers installed it at once, and one in about four runs failed
    // (a duplicate key in pg_namespace: the one that waited on pg-boss's own lock missed the schema the other made).
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    const other = new pg.Client({ connectionString: db.url });
    await other.connect();
    try {
      // Another process is installing it: it holds the install's lock (until its transaction ends).
      await other.query('BEGIN');
      await other.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`webdata-etl:boss-install:${bossSchema('webdata')}`]);
      const opening = openBoss(pool, 'webdata');
      expect(await takenOrWaiting(db.url, opening)).toBe('waiting');
      const installed = `SELECT 1 FROM pg_tables WHERE schemaname = '${bossSchema('webdata')}' AND tablename = 'version'`;
      expect(await sql(db.url, installed)).toEqual([]);
      await other.query('COMMIT');
      const boss = await opening;
      expect(await sql(db.url, installed)).toHaveLength(1);
      await boss.stop({ graceful: false, close: false });
      // Installed, it is started without the lock: a process holding it delays no worker of a later run.
      await other.query('BEGIN');
      await other.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`webdata-etl:boss-install:${bossSchema('webdata')}`]);
      const again = openBoss(pool, 'webdata');
      expect(await takenOrWaiting(db.url, again)).toBe('taken');
      await (await again).stop({ graceful: false, close: false });
      await other.query('COMMIT');
    } finally {
      await other.end();
      await pool.end();
      await db.drop();
    }
  });
});
