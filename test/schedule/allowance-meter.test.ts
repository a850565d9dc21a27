// A key's allowance in the scheduler (src/schedule/allowance-meter.ts, key-pool.ts): credits held in chunks, a request
// that the allowance cannot hold never sent, a key out until its period ends while the others go on, a run stopped
// when every key is out. Over real sockets, against the simulator, in virtual time, with a ledger of the test's own
// whose clock is the virtual clock's wall time (the store's clock).
import { describe, expect, it } from 'vitest';
import { type Client, createClient } from '../../src/client/index.ts';
import { periodAt } from '../../src/schedule/allowance-period.ts';
import { type AllowanceLedger, AllowanceMeter } from '../../src/schedule/allowance-meter.ts';
import { createScheduler, type Outcome, type SchedulerEvent, type SchedulerOptions, virtualClock } from '../../src/schedule/index.ts';
import type { VirtualClock } from '../../src/schedule/clock.ts';
import type { Clock } from '../../src/schedule/clock.ts';
import { type FaultRule, startSimulator } from '../../src/simulator/index.ts';

const KEYS = { a: 'sk_allow_a_0123456789', b: 'sk_allow_b_0123456789' } as const;
type Label = keyof typeof KEYS;

/** One process's ledger of a day's allowance in UTC: what it holds of each period, and every hold it asked for. */
function ledger(credits: number, clock: Clock) {
  const used = new Map<string, number>();
  const asked: number[] = [];
  const store: AllowanceLedger = {
    async hold(want) {
      asked.push(want);
      const storeTime = clock.epoch?.() as number;
      const period = periodAt(storeTime, 'day', 'UTC');
      const granted = Math.max(0, Math.min(want, credits - (used.get(period.key) ?? 0)));
      used.set(period.key, (used.get(period.key) ?? 0) + granted);
      // One process: what it holds is all that was held (spent included: this ledger keeps no spend apart).
      return { granted, allowance: { credits, per: 'day', timezone: 'UTC' }, period, storeTime, mine: used.get(period.key) as number, spent: 0 };
    },
    async giveBack(period, back) {
      used.set(period, (used.get(period) ?? 0) - back);
    },
  };
  return { store, asked, used };
}

async function harness(labels: readonly Label[], clock: VirtualClock, options: SchedulerOptions & { rules?: FaultRule[] }) {
  const sim = await startSimulator({ clock: clock.now, epoch: clock.epoch, rules: options.rules ?? [], keys: labels.map((label) => ({ key: KEYS[label], name: label })) });
  const clients = new Map<string, Client>(labels.map((label) => [label, createClient({ baseUrl: sim.url, apiKey: KEYS[label], timeoutMs: 2000 })]));
  const events: SchedulerEvent[] = [];
  const { rules: _rules, ...rest } = options;
  const scheduler = createScheduler({ clock, random: () => 0.5, ...rest });
  scheduler.on((event) => events.push(event));
  const search = (q: string): Promise<Outcome<unknown>> =>
    scheduler.request({ series: q, path: '/searchengine/search' }, (signal, key) => (clients.get(key) as Client).search({ q }, { signal }));
  const paid = (label: Label) => sim.stats().credits[label]?.debited ?? 0;
  return {
    clock,
    scheduler,
    events,
    search,
    paid,
    async [Symbol.asyncDispose]() {
      for (const client of clients.values()) await client.close();
      await sim.close();
    },
  };
}

describe("a key's allowance in the scheduler", () => {
  it('one key: the requests its allowance holds are sent, the next stops the run as `allowance`, saying when the day opens again', async () => {
    const clock = virtualClock(0, Date.parse('2026-11-27T12:00:00.000Z'));
    const books = ledger(10, clock);
    await using t = await harness(['a'], clock, { concurrency: 3, keys: [{ label: 'a', allowance: new AllowanceMeter({ label: 'a', ledger: books.store, clock }) }] });
    const outcomes = await Promise.all(Array.from({ length: 15 }, (_, i) => t.search(`q${i}`)));
    expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(10);
    expect(outcomes.filter((outcome) => !outcome.ok && outcome.kind === 'stopped' && outcome.reason === 'allowance')).toHaveLength(5);
    expect(t.paid('a')).toBe(10);
    const stop = t.scheduler.stopped;
    expect(stop?.reason).toBe('allowance');
    expect(stop?.message).toBe('key "a": its allowance of 10 credits a day (UTC) is spent for 2026-11-27; it opens again at 2026-11-28T00:00:00.000Z (midnight, UTC)');
    expect(stop?.resumeAt?.toISOString()).toBe('2026-11-28T00:00:00.000Z');
    // Held in chunks, a few requests' worth at a time (the second granted what was left), then asked again only while
    // requests in flight might have given credits back.
    expect(books.asked.slice(0, 2)).toEqual([8, 8]);
    expect(books.asked.length).toBeLessThanOrEqual(8);
    expect(books.used.get('2026-11-27')).toBe(10);
    // Every answer says the period its credits were held in.
    expect(t.events.filter((event) => event.type === 'response').every((event) => event.type === 'response' && event.period === '2026-11-27')).toBe(true);
  });

  it("a request waits while the key's requests in flight may give credits back: a 400 returns its credit, and the last request goes", async () => {
    const clock = virtualClock(0, Date.parse('2026-11-27T12:00:00.000Z'));
    const books = ledger(3, clock);
    await using t = await harness(['a'], clock, {
      concurrency: 4,
      rules: [{ match: { q: 'q0' }, fault: 'status', status: 400 }],
      keys: [{ label: 'a', allowance: new AllowanceMeter({ label: 'a', ledger: books.store, clock }) }],
    });
    const outcomes = await Promise.all(Array.from({ length: 4 }, (_, i) => t.search(`q${i}`)));
    expect(outcomes.map((outcome) => (outcome.ok ? 'ok' : outcome.kind))).toEqual(['failed', 'ok', 'ok', 'ok']);
    expect(t.paid('a')).toBe(3);
    expect(t.scheduler.stopped).toBeUndefined();
  });

  it('a pool: a key whose allowance is spent leaves it until its day ends, the other goes on, and it comes back after midnight', async () => {
    const clock = virtualClock(0, Date.parse('2026-11-27T23:59:52.000Z'));
    const books = ledger(2, clock);
    await using t = await harness(['a', 'b'], clock, {
      concurrency: 2,
      keys: [
        { label: 'a', rate: { requestsPerSecond: 2 }, allowance: new AllowanceMeter({ label: 'a', ledger: books.store, clock }) },
        { label: 'b', rate: { requestsPerSecond: 1 } },
      ],
    });
    const outcomes = await Promise.all(Array.from({ length: 16 }, (_, i) => t.search(`q${i}`)));
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    // Two on the 27th, two on the 28th: the rest went to b.
    const periods = t.events.flatMap((event) => (event.type === 'response' && event.key === 'a' ? [event.period] : []));
    expect(periods).toEqual(['2026-11-27', '2026-11-27', '2026-11-28', '2026-11-28']);
    expect(t.paid('a')).toBe(4);
    expect(t.paid('b')).toBe(12);
    const out = t.events.filter((event) => event.type === 'key_retired');
    expect(out.map((event) => event.type === 'key_retired' && [event.key, event.reason])).toEqual([
      ['a', 'allowance'],
      ['a', 'allowance'],
    ]);
    // At the end a is out again (its 28th spent), and its stats say so, until when.
    expect(t.scheduler.stats().keys.find((key) => key.label === 'a')?.retired).toMatchObject({ reason: 'allowance', path: null });
  });

  it("a run's share of the allowance (`cap`): the run stops there, with no time to resume at", async () => {
    const clock = virtualClock(0, Date.parse('2026-11-27T12:00:00.000Z'));
    const books = ledger(10, clock);
    await using t = await harness(['a'], clock, { concurrency: 1, keys: [{ label: 'a', allowance: new AllowanceMeter({ label: 'a', ledger: books.store, clock, cap: 2 }) }] });
    const outcomes = await Promise.all(Array.from({ length: 4 }, (_, i) => t.search(`q${i}`)));
    expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(2);
    expect(t.scheduler.stopped).toMatchObject({ reason: 'allowance', message: 'key "a": its share for this run (2 credits) is spent' });
    expect(t.scheduler.stopped?.resumeAt).toBeUndefined();
  });

  it('requests taking and giving back while a hold is on its way to the store are neither lost nor counted twice', async () => {
    const clock = virtualClock(0, Date.parse('2026-11-27T12:00:00.000Z'));
    let granted = 0;
    const answers: ((value: number) => void)[] = [];
    const ledger: AllowanceLedger = {
      hold: (want) =>
        new Promise((resolve) => {
          answers.push((grant) => {
            granted += Math.min(grant, want);
            const period = periodAt(clock.epoch?.() as number, 'day', 'UTC');
            resolve({ granted: Math.min(grant, want), allowance: { credits: 12, per: 'day', timezone: 'UTC' }, period, storeTime: clock.epoch?.() as number, mine: granted, spent: 0 });
          });
        }),
      giveBack: async () => undefined,
    };
    const meter = new AllowanceMeter({ label: 'a', ledger, clock });
    // 3 held at first.
    const first = meter.take(1);
    answers.shift()?.(4);
    expect(await first).toMatchObject({ taken: true });
    // A request of 4 credits finds 3 and asks for more; meanwhile one of 1 takes from the 3.
    const heavy = meter.take(4);
    expect(meter.take(1)).toMatchObject({ taken: true });
    answers.shift()?.(2);
    expect(await heavy).toMatchObject({ taken: true });
    // Held 6 in all, taken 1, 1 and 4: nothing is left to take without asking again, and then nothing is granted.
    const more = meter.take(1);
    expect(answers).toHaveLength(1);
    answers.shift()?.(0);
    expect(await more).toMatchObject({ taken: false });
    // A credit given back while a hold is on its way is kept too.
    meter.settle('2026-11-27', 1, false);
    expect(meter.take(1)).toMatchObject({ taken: true });
    expect(granted).toBe(6);
  });

  it('a hold not heard of for a while (a process suspended) is asked again before it is spent, and no more than the store says is held', async () => {
    const clock = virtualClock(0, Date.parse('2026-11-27T12:00:00.000Z'));
    const asked: number[] = [];
    // The store's word on this process's hold: 8, then (the hold expired while it slept, and went back) only 2.
    const mine = [8, 2];
    const ledger: AllowanceLedger = {
      async hold(want) {
        asked.push(want);
        const storeTime = clock.epoch?.() as number;
        const granted = asked.length === 1 ? 8 : Math.min(want, 2);
        return { granted, allowance: { credits: 100, per: 'day', timezone: 'UTC' }, period: periodAt(storeTime, 'day', 'UTC'), storeTime, mine: mine[asked.length - 1] ?? 0, spent: 0 };
      },
      giveBack: async () => undefined,
    };
    const meter = new AllowanceMeter({ label: 'a', ledger, clock, staleAfterMs: 30_000 });
    expect(await meter.take(1)).toMatchObject({ taken: true });
    meter.settle('2026-11-27', 1, true);
    // Within the while: from what is held, without asking.
    await clock.sleep(20_000);
    expect(meter.take(1)).toMatchObject({ taken: true });
    meter.settle('2026-11-27', 1, true);
    expect(asked).toHaveLength(1);
    // Past it: the store is asked first, and it says 2 are held: 2 requests, then it is asked again.
    await clock.sleep(31_000);
    expect(await meter.take(1)).toMatchObject({ taken: true });
    expect(asked).toHaveLength(2);
    expect(meter.take(1)).toMatchObject({ taken: true });
    const third = meter.take(1);
    expect(third).toBeInstanceOf(Promise);
    await third;
    expect(asked).toHaveLength(3);
  });

  it("says what is left of the period as the ledger last said it, less what this process was charged since (the metrics' figure)", async () => {
    const clock = virtualClock(0, Date.parse('2026-11-27T12:00:00.000Z'));
    // Other pipelines spent 40 of 100 before this process's first hold; 70 by its second.
    const spent = [40, 70];
    let holds = 0;
    const ledger: AllowanceLedger = {
      async hold(want) {
        const storeTime = clock.epoch?.() as number;
        holds += 1;
        return { granted: want, allowance: { credits: 100, per: 'day', timezone: 'UTC' }, period: periodAt(storeTime, 'day', 'UTC'), storeTime, mine: want, spent: spent[holds - 1] ?? 0 };
      },
      giveBack: async () => undefined,
    };
    const meter = new AllowanceMeter({ label: 'a', ledger, clock });
    expect(meter.figures).toBeUndefined();
    expect(await meter.take(1)).toMatchObject({ taken: true });
    meter.settle('2026-11-27', 1, true);
    expect(meter.take(1)).toMatchObject({ taken: true });
    meter.settle('2026-11-27', 1, false);
    // 40 spent by the others, 1 charged here since (the one not charged is not counted).
    expect(meter.figures).toEqual({ credits: 100, per: 'day', period: '2026-11-27', left: 59, endsAt: Date.parse('2026-11-28T00:00:00.000Z') });
    // Taken until the chunk of 8 is gone: the next hold hears 70 spent.
    for (let i = 0; i < 7; i += 1) {
      expect(await meter.take(1)).toMatchObject({ taken: true });
      meter.settle('2026-11-27', 1, true);
    }
    expect(await meter.take(1)).toMatchObject({ taken: true });
    expect(holds).toBe(2);
    expect(meter.figures?.left).toBe(30);
  });
});
