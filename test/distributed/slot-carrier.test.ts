import type pg from 'pg';
import { expect, it, vi } from 'vitest';
import { WorkerExpiredError } from '../../src/errors/worker-expired-error.ts';
import { expireDeadWorkers, sharedMeter } from '../../src/distributed/shared-meter.ts';
import { sharedPacer } from '../../src/distributed/shared-pacer.ts';
import { CARRY_WAIT_MS } from '../../src/distributed/slot-carrier.ts';
import type { Charge } from '../../src/schedule/credit-meter.ts';
import { virtualClock } from '../../src/schedule/index.ts';
import { describePostgres, sql } from '../postgres/pg.ts';
import { migratedDatabase } from './migrated-database.ts';

// The run's slots carry the shared meter's business (src/distributed/slot-carrier.ts, `acquireCarrying` in
// statements.ts): the settles waiting, and a credit reserved ahead for the slot's request. The meter's promises hold
// as they did with statements of its own: never past the budget, a dead worker's reservations counted once.

const S = 'webdata';
const charge = (weight = 1): Charge => ({ weight, path: '/searchengine/search', series: 'q' });

describePostgres('slots that carry the shared meter', () => {
  const db = migratedDatabase(S);
  const { pool } = db;
  let runs = 0;
  const run = async (budget: number, workers: string[]) => {
    const id = `run-${++runs}`;
    await sql(db.url, `INSERT INTO ${S}.run_limits (run_id, budget, interval_ms) VALUES ($1, $2, 0)`, [id, budget]);
    for (const worker of workers) await sql(db.url, `INSERT INTO ${S}.workers (run_id, worker_id, host, pid) VALUES ($1, $2, 'test', 1)`, [id, worker]);
    return id;
  };
  const limitsOf = async (id: string) => (await sql(db.url, `SELECT spent, uncertain, reserved FROM ${S}.run_limits WHERE run_id = $1`, [id]))[0];
  const workersOf = async (id: string) => sql(db.url, `SELECT worker_id, status, credits, reserved FROM ${S}.workers WHERE run_id = $1 ORDER BY worker_id`, [id]);
  /** A worker's meter and the pacer of the run's row carrying it, as RunWorker wires them; `sent` counts its statements by their first words. */
  const worker = async (id: string, workerId: string) => {
    const sent = new Map<string, number>();
    const p = counting(pool(8), sent);
    const meter = sharedMeter(p, S, id, workerId);
    await meter.refresh();
    const pacer = sharedPacer(p, S, id, { leads: () => false, carry: { carrier: meter.carrier, workerId } })(Number.POSITIVE_INFINITY, virtualClock(0));
    /** A request as the scheduler makes it: its slot, then its reservation. */
    const request = async () => {
      await pacer.acquire();
      return meter.reserve(1);
    };
    return { meter, pacer, request, sent };
  };

  it('never passes the budget, whatever the interleaving of two workers\' slots; settles ride with slots; nothing stays reserved', async () => {
    const id = await run(20, ['w1', 'w2']);
    const one = await worker(id, 'w1');
    const two = await worker(id, 'w2');
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? one : two)).map(async (w) => ({ w, taken: await w.request() })));
    const taken = answers.filter((answer) => answer.taken);
    expect(taken).toHaveLength(20);
    expect(await limitsOf(id)).toMatchObject({ spent: 0, reserved: 20 });

    // Five spent, fifteen given back; then slots carry them (no statement of the meter's own is needed).
    taken.forEach(({ w }, i) => (i < 5 ? w.meter.commit(charge()) : w.meter.release(charge())));
    await Promise.all([one.pacer.acquire(), two.pacer.acquire()]);
    const carried = await limitsOf(id);
    // Carried by the slots, or (had a slot left before a settle) written alone: the total is the same.
    await Promise.all([one.meter.flush(), two.meter.flush()]);
    expect(await limitsOf(id)).toEqual({ spent: 5, uncertain: 0, reserved: 0 });
    expect(carried?.spent).toBe(5);
    const workers = await workersOf(id);
    expect(workers.map((w) => w.reserved)).toEqual([0, 0]);
    expect(workers.reduce((sum, w) => sum + Number(w.credits), 0)).toBe(5);

    // The rest of the budget, one request at a time: exactly fifteen more, then none.
    for (let i = 0; i < 15; i++) {
      expect(await one.request()).toBe(true);
      one.meter.commit(charge());
    }
    expect(await two.request()).toBe(false);
    await Promise.all([one.meter.flush(), two.meter.flush()]);
    expect(await limitsOf(id)).toEqual({ spent: 20, uncertain: 0, reserved: 0 });
    expect((await workersOf(id)).map((w) => w.reserved)).toEqual([0, 0]);
  });

  it('a settle waits its own CARRY_WAIT_MS for a slot to carry it, not what was left of an earlier settle\'s wait', async () => {
    // The meter's timers only, in the test's hands (its waits for a slot, and for credits reserved ahead to go unused).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const id = await run(20, ['w1']);
      const one = await worker(id, 'w1');
      const alone = () => one.sent.get('WITH mine AS') ?? 0;
      /** Until the statements the meter's timers started are sent (bounded). */
      const sentSoon = async (n: number) => {
        for (let i = 0; i < 200 && alone() < n; i++) await new Promise((resolve) => setImmediate(resolve));
      };
      for (let i = 0; i < 2; i++) expect(await one.request()).toBe(true);
      // A settle, carried by the next slot.
      one.meter.commit(charge());
      await one.pacer.acquire();
      expect(await limitsOf(id)).toMatchObject({ spent: 1 });
      // Another, most of a wait later; the first one's wait ends meanwhile. Before, its timer (left running) then wrote
      // the second settle alone, in a statement of the meter's own; now the second waits its own CARRY_WAIT_MS.
      await vi.advanceTimersByTimeAsync(CARRY_WAIT_MS - 50);
      one.meter.commit(charge());
      await vi.advanceTimersByTimeAsync(100);
      await sentSoon(1);
      expect(alone()).toBe(0);
      await one.pacer.acquire();
      expect(await limitsOf(id)).toMatchObject({ spent: 2 });
      // Unless no slot comes within its wait: then it goes alone, as before.
      expect(await one.request()).toBe(true);
      one.meter.commit(charge());
      await vi.advanceTimersByTimeAsync(CARRY_WAIT_MS);
      await sentSoon(1);
      expect(alone()).toBe(1);
      await one.meter.flush();
      expect(await limitsOf(id)).toEqual({ spent: 3, uncertain: 0, reserved: 0 });
    } finally {
      vi.useRealTimers();
    }
  });

  it('a worker presumed dead: what it held is counted as uncertain spend once; its carried settles move nothing and it reserves nothing more', async () => {
    const id = await run(20, ['w1', 'w2']);
    const dying = await worker(id, 'w1');
    const living = await worker(id, 'w2');
    for (let i = 0; i < 3; i++) expect(await dying.request()).toBe(true);
    expect(await living.request()).toBe(true);
    await sql(db.url, `UPDATE ${S}.workers SET heartbeat_at = clock_timestamp() - interval '10 minutes' WHERE run_id = $1 AND worker_id = 'w1'`, [id]);
    const [up] = await sql(db.url, `SELECT extract(epoch FROM clock_timestamp() - pg_postmaster_start_time())::float8 AS s`);
    // A limit past w1's beat (10 minutes) and within the server's time up, however long the suite has run.
    expect(await expireDeadWorkers(pool(), S, id, Math.min((up?.s as number) / 2, 300))).toBe(1);
    expect(await limitsOf(id)).toMatchObject({ spent: 3, uncertain: 3, reserved: 1 });

    // Only slow after all: its settles ride its next slot, which it gets; they move nothing, and it takes no credit ahead.
    dying.meter.commit(charge());
    dying.meter.release(charge());
    dying.meter.uncertain(charge());
    await dying.pacer.acquire();
    await dying.meter.flush();
    expect(await limitsOf(id)).toMatchObject({ spent: 3, uncertain: 3, reserved: 1 });
    await expect(dying.request()).rejects.toBeInstanceOf(WorkerExpiredError);

    living.meter.commit(charge());
    await living.meter.flush();
    expect(await limitsOf(id)).toEqual({ spent: 4, uncertain: 3, reserved: 0 });
    expect((await workersOf(id)).map((w) => [w.status, w.reserved, w.credits])).toEqual([['dead', 0, 3], ['working', 0, 1]]);
  });
});

/** The pool, counting the statements sent through its `query` by their first three words (the settle's: "WITH mine AS"). */
function counting(pool: pg.Pool, sent: Map<string, number>): pg.Pool {
  return new Proxy(pool, {
    get(target, property) {
      if (property === 'query') {
        return (text: unknown, ...rest: unknown[]) => {
          if (typeof text === 'string') {
            const words = text.trim().split(/\s+/).slice(0, 3).join(' ');
            sent.set(words, (sent.get(words) ?? 0) + 1);
          }
          return (target.query as (...args: unknown[]) => unknown)(text, ...rest);
        };
      }
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
