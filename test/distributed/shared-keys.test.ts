// Each key of a pool as the workers of a distributed run share it (docs/distributed.md#a-pool-of-keys-across-workers):
// its own pacer row, share of the credits and retirements, on a real PostgreSQL cluster, workers on their own connections.
import pg from 'pg';
import { expect, it } from 'vitest';
import { sharedKeys } from '../../src/distributed/shared-key.ts';
import { type SharedSlot, sharedPacer } from '../../src/distributed/shared-pacer.ts';
import { virtualClock } from '../../src/schedule/index.ts';
import { describePostgres, sql } from '../postgres/pg.ts';
import { migratedDatabase } from './migrated-database.ts';

const S = 'webdata';

describePostgres("a pool's keys shared by the workers of a run, in PostgreSQL", () => {
  const db = migratedDatabase(S);
  const { pool } = db;
  let runs = 0;
  const run = async () => {
    const id = `run-${++runs}`;
    await sql(db.url, `INSERT INTO ${S}.run_limits (run_id, interval_ms) VALUES ($1, 1000)`, [id]);
    return id;
  };
  const keyRow = async (id: string, label: string) =>
    (await sql(db.url, `SELECT interval_ms, extract(epoch FROM paused_until) * 1000 AS paused_ms, spent, reserved, max_credits, rejected FROM ${S}.run_key_limits WHERE run_id = $1 AND label = $2`, [id, label]))[0];

  it("each key paces on its own row: its own rate, its own pause and its own 429s; the run's row is left alone", async () => {
    const id = await run();
    const slots: SharedSlot[] = [];
    const clock = virtualClock(0);
    const leader = sharedPacer(pool(), S, id, { leads: () => true, onSlot: (slot) => slots.push(slot) });
    const follower = sharedPacer(pool(), S, id, { leads: () => false, onSlot: (slot) => slots.push(slot) });
    const a = [leader(50, clock, 'a'), follower(50, clock, 'a')];
    const b = [leader(10, clock, 'b'), follower(10, clock, 'b')];
    await Promise.all(Array.from({ length: 20 }, (_, i) => (a[i % 2] as (typeof a)[number]).acquire()));
    await Promise.all(Array.from({ length: 4 }, (_, i) => (b[i % 2] as (typeof b)[number]).acquire()));
    expect(Number((await keyRow(id, 'a'))?.interval_ms)).toBe(20);
    expect(Number((await keyRow(id, 'b'))?.interval_ms)).toBe(100);
    // Slots of each key one of its intervals apart, whichever worker took them.
    for (const [key, interval] of [['a', 20], ['b', 100]] as const) {
      const times = slots.filter((slot) => slot.key === key).map((slot) => slot.slotEpochMs).sort((x, y) => x - y);
      for (let i = 1; i < times.length; i++) expect((times[i] as number) - (times[i - 1] as number)).toBeGreaterThanOrEqual(interval - 0.002);
    }
    // A 429 on b, reported by the follower with its next slot of b, counts in b's row only; the leader's cut of b
    // reaches b's row only.
    follower.report(false, clock.now(), 'b');
    await b[1]?.acquire();
    expect((await keyRow(id, 'b'))?.rejected).toBe('1');
    expect((await keyRow(id, 'a'))?.rejected).toBe('0');
    b[0]?.setRate(5);
    b[0]?.pauseUntil(clock.now() + 60_000);
    await b[0]?.acquire().catch(() => undefined);
    expect(Number((await keyRow(id, 'b'))?.interval_ms)).toBe(200);
    const paused = Number((await keyRow(id, 'b'))?.paused_ms);
    slots.length = 0;
    // a is not held back by b's pause, nor slowed by b's cut.
    await a[1]?.acquire();
    expect(slots[0]?.slotEpochMs).toBeLessThan(paused - 50_000);
    expect(Number((await keyRow(id, 'a'))?.interval_ms)).toBe(20);
    const [runRow] = await sql(db.url, `SELECT interval_ms, rejected FROM ${S}.run_limits WHERE run_id = $1`, [id]);
    expect(runRow).toEqual({ interval_ms: 1000, rejected: '0' });
  });

  it("a key's share is never passed, whatever the interleaving of workers on different connections; what is settled is spent or given back", async () => {
    const id = await run();
    const workers = [pool(8), pool(8)].map((p) => {
      const pacer = sharedPacer(p, S, id, { leads: () => false });
      return { pacer, keys: sharedKeys(p, S, id, pacer) };
    });
    const shares = workers.map((worker) => worker.keys('b', 10));
    const asked = await Promise.all(Array.from({ length: 40 }, async (_, i) => ({ share: shares[i % 2] as (typeof shares)[number], taken: await (shares[i % 2] as (typeof shares)[number]).reserve(1) })));
    const taken = asked.filter((each) => each.taken);
    expect(taken).toHaveLength(10);
    expect(await keyRow(id, 'b')).toMatchObject({ max_credits: 10, spent: 0, reserved: 10 });
    taken.forEach(({ share }, i) => share.settle(1, i < 4 ? 1 : 0));
    await expect.poll(async () => keyRow(id, 'b')).toMatchObject({ spent: 4, reserved: 0 });
    for (let i = 0; i < 6; i++) expect(await shares[0]?.reserve(1)).toBe(true);
    expect(await shares[1]?.reserve(1)).toBe(false);
    // A key without a share reserves at once, without a round trip.
    expect(workers[0]?.keys('a', undefined).reserve(1)).toBe(true);
  });

  it("a key retired by one worker is heard by another at its next slot of that key: for the run (401), or for one endpoint (402, 403)", async () => {
    const id = await run();
    const clock = virtualClock(0);
    const worker = (p: pg.Pool) => {
      const pacer = sharedPacer(p, S, id, { leads: () => false });
      return { keys: sharedKeys(p, S, id, pacer), b: pacer(1000, clock, 'b'), a: pacer(1000, clock, 'a') };
    };
    const one = worker(pool());
    const two = worker(pool());
    await Promise.all([one.b.acquire(), two.b.acquire(), two.a.acquire()]);
    expect(two.keys('b', undefined).heard()).toEqual([]);
    one.keys('b', undefined).retire({ reason: 'payment_required', message: 'HTTP 402: no credits left', at: 0, path: '/searchengine/search' });
    one.keys('b', undefined).retire({ reason: 'unauthorized', message: 'HTTP 401: the key was refused', at: 0 });
    // The second retirement of the run stands not over the first: written once each, in the order given.
    await expect.poll(async () => (await sql(db.url, `SELECT retired_reason FROM ${S}.run_key_limits WHERE run_id = $1 AND label = 'b'`, [id]))[0]?.retired_reason).toBe('unauthorized');
    await two.b.acquire();
    expect(two.keys('b', undefined).heard()).toEqual([
      { reason: 'unauthorized', message: 'HTTP 401: the key was refused' },
      { reason: 'payment_required', message: 'HTTP 402: no credits left', path: '/searchengine/search' },
    ]);
    // Another key's slot says nothing of b, and b's retirement nothing of a.
    await two.a.acquire();
    expect(two.keys('a', undefined).heard()).toEqual([]);
    one.keys('b', undefined).retire({ reason: 'forbidden', message: 'HTTP 403', at: 0 });
    await two.b.acquire();
    expect(two.keys('b', undefined).heard()[0]?.reason).toBe('unauthorized');
  });
});
