import { expect, it, vi } from 'vitest';
import { WorkerExpiredError } from '../../src/errors/worker-expired-error.ts';
import { expireDeadWorkers, sharedMeter } from '../../src/distributed/shared-meter.ts';
import { type SharedSlot, sharedPacer } from '../../src/distributed/shared-pacer.ts';
import type { Clock } from '../../src/schedule/clock.ts';
import type { Charge } from '../../src/schedule/credit-meter.ts';
import { createScheduler, virtualClock } from '../../src/schedule/index.ts';
import { clientFor, simulator } from '../helpers.ts';
import { describePostgres, sql } from '../postgres/pg.ts';
import { migratedDatabase } from './migrated-database.ts';

const S = 'webdata';
const charge = (weight = 1): Charge => ({ weight, path: '/searchengine/search', series: 'q' });

describePostgres('limits shared by the workers of a run, in PostgreSQL', () => {
  const db = migratedDatabase(S);
  const { pool } = db;
  let runs = 0;
  /** A run of the test's own, with its limits' row and its workers' rows, as the planning worker writes them. */
  const run = async (limits: { budget?: number | null; intervalMs?: number }, workers: string[] = []) => {
    const id = `run-${++runs}`;
    await sql(db.url, `INSERT INTO ${S}.run_limits (run_id, budget, interval_ms) VALUES ($1, $2, $3)`, [id, limits.budget ?? null, limits.intervalMs ?? 0]);
    for (const worker of workers) await sql(db.url, `INSERT INTO ${S}.workers (run_id, worker_id, host, pid) VALUES ($1, $2, 'test', 1)`, [id, worker]);
    return id;
  };
  const limitsOf = async (id: string) => {
    const [row] = await sql(db.url, `SELECT budget, spent, uncertain, reserved, interval_ms, extract(epoch FROM paused_until) * 1000 AS paused_ms FROM ${S}.run_limits WHERE run_id = $1`, [id]);
    return { ...row, paused_ms: Number(row?.paused_ms) } as { budget: number | null; spent: number; uncertain: number; reserved: number; interval_ms: number; paused_ms: number };
  };
  const workerOf = async (id: string, worker: string) =>
    (await sql(db.url, `SELECT status, credits, reserved FROM ${S}.workers WHERE run_id = $1 AND worker_id = $2`, [id, worker]))[0];

  it('hands out slots one interval apart to workers on different connections, and every worker obeys a pause', async () => {
    const id = await run({});
    const slots: SharedSlot[] = [];
    const onSlot = (slot: SharedSlot) => slots.push(slot);
    const clock = virtualClock(0);
    const leader = sharedPacer(pool(), S, id, { leads: () => true, onSlot })(50, clock);
    const follower = sharedPacer(pool(), S, id, { leads: () => false, onSlot })(50, clock);

    // The leader's first rate seeds the row, which had none; the follower reads it back.
    await leader.acquire();
    expect((await limitsOf(id)).interval_ms).toBe(20);
    await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? leader : follower).acquire()));
    expect(follower.rate).toBe(50);
    expect(slots).toHaveLength(41);
    const times = slots.map((slot) => slot.slotEpochMs).sort((a, b) => a - b);
    // Timestamps keep microseconds: a step of exactly one interval may read a thousandth of a millisecond short.
    for (let i = 1; i < times.length; i++) expect((times[i] as number) - (times[i - 1] as number)).toBeGreaterThanOrEqual(20 - 0.002);

    // A pause one worker heard of (a 429) holds back the next slot of another.
    leader.pauseUntil(clock.now() + 5_000);
    await leader.acquire();
    const { paused_ms } = await limitsOf(id);
    slots.length = 0;
    await follower.acquire();
    expect(slots[0]?.slotEpochMs).toBeGreaterThanOrEqual(paused_ms);
  });

  it('a new rate or a pause gives back the slots reserved under the old terms: the next slot is not behind them', async () => {
    const id = await run({ intervalMs: 1000 });
    const slots: SharedSlot[] = [];
    const clock = virtualClock(0);
    const leader = sharedPacer(pool(), S, id, { leads: () => true, onSlot: (slot) => slots.push(slot) })(1, clock);
    const dbNow = async () => Number((await sql(db.url, 'SELECT extract(epoch FROM clock_timestamp()) * 1000 AS now'))[0]?.now);
    // Five slots a second apart: the row's next free slot is five seconds ahead (the workers holding them were told
    // of the change and take theirs again under the new terms). Counted from the database's time before they were
    // asked for, not after: a slow second between the two was enough to fail it.
    const beforeSlots = await dbNow();
    await Promise.all(Array.from({ length: 5 }, () => leader.acquire()));
    expect((slots.at(-1)?.slotEpochMs ?? 0) - beforeSlots).toBeGreaterThan(3_000);
    leader.setRate(50);
    slots.length = 0;
    await leader.acquire();
    const afterRate = await dbNow();
    expect(slots[0]?.slotEpochMs).toBeLessThan(afterRate + 1_000);

    // The same for a short pause: the first slot after it is an interval after its end, not after the old reservations.
    const beforeMore = await dbNow();
    await Promise.all(Array.from({ length: 50 }, () => leader.acquire()));
    expect((slots.at(-1)?.slotEpochMs ?? 0) - beforeMore).toBeGreaterThan(500);
    leader.pauseUntil(clock.now() + 100);
    slots.length = 0;
    await leader.acquire();
    const { paused_ms } = await limitsOf(id);
    expect(slots[0]?.slotEpochMs).toBeGreaterThanOrEqual(paused_ms);
    expect(slots[0]?.slotEpochMs).toBeLessThan(paused_ms + 100);
  });

  it('after a cut, the next slot is a whole new interval after the latest one handed out, not an old interval', async () => {
    const id = await run({ intervalMs: 20 });
    const slots: SharedSlot[] = [];
    const leader = sharedPacer(pool(), S, id, { leads: () => true, onSlot: (slot) => slots.push(slot) })(50, virtualClock(0));
    await leader.acquire();
    // 20/s to 5/s: the request that slot let go may have left just now; the next one comes 200 ms after it.
    leader.setRate(5);
    await leader.acquire();
    const [before, after] = slots.map((slot) => slot.slotEpochMs) as [number, number];
    expect(after - before).toBeGreaterThanOrEqual(200 - 0.002);
  });

  it('takes its rate from the leader only: a follower’s rate changes nothing', async () => {
    const id = await run({ intervalMs: 20 });
    let leads = false;
    const clock = virtualClock(0);
    const worker = sharedPacer(pool(), S, id, { leads: () => leads })(50, clock);
    const other = sharedPacer(pool(), S, id, { leads: () => false })(50, clock);

    worker.setRate(10);
    await worker.acquire();
    expect((await limitsOf(id)).interval_ms).toBe(20);
    expect(worker.rate).toBe(50);

    leads = true;
    worker.setRate(100);
    expect(worker.rate).toBe(100);
    await worker.acquire();
    expect((await limitsOf(id)).interval_ms).toBe(10);
    await other.acquire();
    expect(other.rate).toBe(100);
  });

  it("paces a follower's first slots at its own start when no worker has set the run's rate yet: never at the row's 0", async () => {
    const id = await run({});
    const slots: SharedSlot[] = [];
    // The leader's pacer is not made yet (its worker is still wiring its run): the follower's first slots come first.
    const follower = sharedPacer(pool(), S, id, { leads: () => false, onSlot: (slot) => slots.push(slot) })(8, virtualClock(0));
    await Promise.all([follower.acquire(), follower.acquire(), follower.acquire()]);
    expect(slots.map((slot) => slot.intervalMs)).toEqual([125, 125, 125]);
    const times = slots.map((slot) => slot.slotEpochMs).sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) expect((times[i] as number) - (times[i - 1] as number)).toBeGreaterThanOrEqual(125 - 0.002);
    // The leader's pacer, made later, finds the rate set: the same one, every worker having started where this one did.
    const leader = sharedPacer(pool(), S, id, { leads: () => true })(8, virtualClock(0));
    await leader.acquire();
    expect((await limitsOf(id)).interval_ms).toBe(125);
  });

  it('does not seed a rate over one the row already has', async () => {
    const id = await run({ intervalMs: 40 });
    const pacer = sharedPacer(pool(), S, id, { leads: () => true })(50, virtualClock(0));
    await pacer.acquire();
    expect((await limitsOf(id)).interval_ms).toBe(40);
    expect(pacer.rate).toBe(25);
  });

  it("counts a 429 against the run's rate only if its request was paced no faster than that rate: one a cut already answers is not counted, by the leader or in the row", async () => {
    const id = await run({ intervalMs: 20 });
    let now = 0;
    const clock: Clock = { now: () => now, sleep: async (ms) => void (now += ms) };
    const slots: SharedSlot[] = [];
    const leading = sharedPacer(pool(), S, id, { leads: () => true });
    const leader = leading(50, clock);
    const following = sharedPacer(pool(), S, id, { leads: () => false, onSlot: (slot) => slots.push(slot) });
    const follower = following(50, clock);
    const rejected = async () => Number((await sql(db.url, `SELECT rejected FROM ${S}.run_limits WHERE run_id = $1`, [id]))[0]?.rejected);

    // The follower paces at 50/s; a request it sent then gets its 429 only after the leader cut the rate to 10/s.
    await follower.acquire();
    now += 5;
    const sentBeforeTheCut = now;
    now += 5;
    leader.setRate(10);
    await leader.acquire();
    following.report(false, sentBeforeTheCut);
    await follower.acquire();
    expect(slots.at(-1)?.intervalMs).toBe(100);
    // Paced under the old rate: the cut answers it, so the leader hears of no 429 and the row counts none.
    expect(await rejected()).toBe(0);
    expect(slots.at(-1)?.outcomes.rejected).toBe(0);
    expect(slots.at(-1)?.reported.rejected).toBe(0);

    // Sent after the follower paced under the cut: a 429 of the slower rate, counted (the leader cuts again for it).
    now += 50;
    following.report(false, now);
    await follower.acquire();
    expect(await rejected()).toBe(1);
    expect(slots.at(-1)?.outcomes.rejected).toBe(1);
    expect(slots.at(-1)?.reported.rejected).toBe(1);

    // After a raise, a 429 paced under the slower rate before it still counts: the faster rate would fail too.
    now += 50;
    const sentBeforeTheRaise = now;
    now += 5;
    leader.setRate(20);
    await leader.acquire();
    following.report(false, sentBeforeTheRaise);
    await follower.acquire();
    expect(slots.at(-1)?.intervalMs).toBe(50);
    expect(await rejected()).toBe(2);
    // And every answer reported is counted once, 2xx or counted 429, whichever worker sent it.
    now += 60;
    following.report(true, now);
    leading.report(false, now);
    await leader.acquire();
    await follower.acquire();
    expect(slots.at(-1)?.outcomes).toEqual({ accepted: 1, rejected: 3 });
    expect(slots.at(-1)?.reported).toEqual({ accepted: 1, rejected: 2 });
  });

  it("reports a follower's 429 with the pause it writes: the leader's next slot hears it at once, and the follower's next counts it no more", async () => {
    const id = await run({ intervalMs: 20 });
    let now = 0;
    const clock: Clock = { now: () => now, sleep: async (ms) => void (now += ms) };
    const heard: SharedSlot[] = [];
    const own: SharedSlot[] = [];
    const leader = sharedPacer(pool(), S, id, { leads: () => true, onSlot: (slot) => heard.push(slot) })(50, clock);
    const following = sharedPacer(pool(), S, id, { leads: () => false, onSlot: (slot) => own.push(slot) });
    const follower = following(50, clock);
    await leader.acquire();
    await follower.acquire();
    // A 429 comes to the follower, and its scheduler pauses for it at once (the pause every worker obeys).
    now += 5;
    following.report(false, now);
    follower.pauseUntil(now + 1_000);
    await vi.waitFor(async () => expect((await limitsOf(id)).paused_ms).toBeGreaterThan(0), { timeout: 10_000, interval: 20 });
    // The leader, renewed by the pause's notification, takes its slot again: the 429 is in the run's totals already.
    // Before, it came with the follower's next slot, after the pause: the leader cut half a second late.
    await leader.acquire();
    expect(heard.at(-1)?.outcomes).toEqual({ accepted: 0, rejected: 1 });
    expect(heard.at(-1)?.reported).toEqual({ accepted: 0, rejected: 0 });
    // Reported once: the follower's next slot carries nothing more, and counts it as its own.
    await follower.acquire();
    expect(own.at(-1)?.outcomes).toEqual({ accepted: 0, rejected: 1 });
    expect(own.at(-1)?.reported).toEqual({ accepted: 0, rejected: 1 });
  });

  it('takes another slot when this worker hears of a pause while it waits for the one it got', async () => {
    const id = await run({ intervalMs: 1_000 });
    const slots: SharedSlot[] = [];
    let now = 0;
    let pauseOnce: (() => void) | undefined;
    const clock: Clock = {
      now: () => now,
      sleep: async (ms) => {
        now += ms;
        pauseOnce?.();
        pauseOnce = undefined;
      },
    };
    const pacer = sharedPacer(pool(), S, id, { leads: () => true, onSlot: (slot) => slots.push(slot) })(1, clock);
    await pacer.acquire();
    pauseOnce = () => pacer.pauseUntil(now + 60_000);
    // The second slot is a second away: while waiting for it, a pause of a minute comes.
    const slot = await pacer.acquire();
    expect(slots).toHaveLength(3);
    expect(slot).toBeGreaterThanOrEqual(pacer.pausedUntil);
    expect((slots[2]?.slotEpochMs ?? 0) - (slots[1]?.slotEpochMs ?? 0)).toBeGreaterThan(50_000);
  });

  it('never passes the budget, whatever the interleaving of reservations of workers on different connections', async () => {
    const id = await run({ budget: 20 }, ['w1', 'w2']);
    const one = sharedMeter(pool(8), S, id, 'w1');
    const two = sharedMeter(pool(8), S, id, 'w2');
    const asked = Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? one : two)).map(async (meter) => ({ meter, taken: await meter.reserve(1) }));
    const answers = await Promise.all(asked);
    const taken = answers.filter((answer) => answer.taken);
    expect(taken).toHaveLength(20);
    expect(await limitsOf(id)).toMatchObject({ spent: 0, reserved: 20 });
    // Held by reservations in flight, not spent: a request may yet be sent once one of them is returned.
    expect(one.couldTake(1)).toBe(true);

    taken.forEach(({ meter }, i) => (i < 5 ? meter.commit(charge()) : meter.release(charge())));
    await Promise.all([one.flush(), two.flush()]);
    expect(await limitsOf(id)).toMatchObject({ spent: 5, uncertain: 0, reserved: 0 });
    const workers = [await workerOf(id, 'w1'), await workerOf(id, 'w2')];
    expect(workers.map((w) => w?.reserved)).toEqual([0, 0]);
    expect(workers.reduce((sum, w) => sum + Number(w?.credits), 0)).toBe(5);

    // The rest of the budget, spent one credit at a time: no room only once spend alone leaves none.
    for (let i = 0; i < 15; i++) expect(await one.reserve(1)).toBe(true);
    expect(await one.reserve(1)).toBe(false);
    for (let spent = 6; spent <= 20; spent++) {
      one.commit(charge());
      await one.flush();
      expect(one.snapshot().spent).toBe(spent);
      expect(one.couldTake(1)).toBe(spent < 20);
    }
    await two.refresh();
    expect(two.couldTake(1)).toBe(false);
    expect(two.snapshot()).toMatchObject({ budget: 20, spent: 20, reserved: 0, remaining: 0 });
  });

  it('counts what a dead worker held as uncertain spend, once: its late commits move nothing', async () => {
    const id = await run({ budget: 20 }, ['w1', 'w2']);
    const dying = sharedMeter(pool(), S, id, 'w1');
    const living = sharedMeter(pool(), S, id, 'w2');
    for (let i = 0; i < 3; i++) expect(await dying.reserve(1)).toBe(true);
    expect(await living.reserve(2)).toBe(true);
    await sql(db.url, `UPDATE ${S}.workers SET heartbeat_at = clock_timestamp() - CASE worker_id WHEN 'w1' THEN interval '10 minutes' ELSE interval '0' END WHERE run_id = $1`, [id]);
    // Beats are stale only by the server's time up: within the stale limit of its start, nobody is (a restart took
    // every worker's session, and nobody could beat while it was down). The limit here is within the server's time up.
    const [up] = await sql(db.url, `SELECT extract(epoch FROM clock_timestamp() - pg_postmaster_start_time())::float8 AS s`);
    // A limit past w1's beat (10 minutes) and within the server's time up, however long the suite has run.
    const uptime = up?.s as number;
    const stale = Math.min(uptime / 2, 300);
    expect(await expireDeadWorkers(pool(), S, id, uptime + 60)).toBe(0);

    expect(await expireDeadWorkers(pool(), S, id, stale)).toBe(1);
    expect(await limitsOf(id)).toMatchObject({ spent: 3, uncertain: 3, reserved: 2 });
    expect(await workerOf(id, 'w1')).toMatchObject({ status: 'dead', reserved: 0, credits: 3 });
    expect(await expireDeadWorkers(pool(), S, id, stale)).toBe(0);

    // The presumed dead worker was only slow: what it now reports was already counted.
    dying.commit(charge());
    dying.release(charge());
    dying.uncertain(charge());
    await dying.flush();
    expect(await limitsOf(id)).toMatchObject({ spent: 3, uncertain: 3, reserved: 2 });
    await expect(dying.reserve(1)).rejects.toBeInstanceOf(WorkerExpiredError);

    living.commit(charge(2));
    await living.flush();
    expect(await limitsOf(id)).toMatchObject({ spent: 5, uncertain: 3, reserved: 0 });
    expect(await workerOf(id, 'w2')).toMatchObject({ status: 'working', reserved: 0, credits: 2 });
  });

  it('without a budget, reserves at once and still counts spend into the run and the worker', async () => {
    const id = await run({ budget: null }, ['w1']);
    const meterPool = pool();
    const meter = sharedMeter(meterPool, S, id, 'w1', { weights: { '/heavy': 5 } });
    await meter.refresh();
    const queries = vi.spyOn(meterPool, 'query');
    for (let i = 0; i < 10; i++) expect(meter.reserve(1)).toBe(true);
    expect(queries).not.toHaveBeenCalled();
    expect(meter.couldTake(1_000_000)).toBe(true);

    for (let i = 0; i < 7; i++) meter.commit(charge());
    meter.uncertain({ weight: meter.weightOf('/heavy'), path: '/heavy', series: 'q' });
    meter.release(charge());
    await meter.flush();
    expect(await limitsOf(id)).toMatchObject({ budget: null, spent: 12, uncertain: 5, reserved: 0 });
    expect(await workerOf(id, 'w1')).toMatchObject({ credits: 12, reserved: 0 });
    expect(meter.snapshot()).toMatchObject({ budget: null, spent: 12, uncertain: 5, remaining: null, byEndpoint: { '/searchengine/search': 7, '/heavy': 5 } });
  });

  it('serves as the scheduler’s meter and pacer: the budget in the row turns requests away', async () => {
    const id = await run({ budget: 3 }, ['w1']);
    const clock = virtualClock(0);
    await using sim = await simulator({ clock: clock.now });
    const client = clientFor(sim);
    const shared = pool();
    const meter = sharedMeter(shared, S, id, 'w1');
    const scheduler = createScheduler({ clock, meter, pacer: sharedPacer(shared, S, id, { leads: () => true }) });
    const outcomes = await Promise.all(['a', 'b', 'c', 'd'].map((q) => scheduler.request({ series: q, path: '/searchengine/search' }, (signal) => client.search({ q }, { signal }))));
    await client.close();
    await meter.flush();
    expect(outcomes.filter((o) => o.ok)).toHaveLength(3);
    expect(outcomes.filter((o) => !o.ok && o.kind === 'stopped' && o.reason === 'budget')).toHaveLength(1);
    expect(await limitsOf(id)).toMatchObject({ spent: 3, reserved: 0 });
  });
});
