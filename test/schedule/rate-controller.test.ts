// The rate controller on a clock of the test's own: when it raises, cuts and probes (src/schedule/rate-controller.ts).
import { describe, expect, it } from 'vitest';
import { createRateController } from '../../src/schedule/rate-controller.ts';

/**
 * A controller configured at 30/s against a server that accepts up to `limit` per second and answers at once (a 429
 * for any request sent faster): `seconds` of requests at the controller's own rate, with the times of the 429s.
 */
function against(limit: number, seconds: number) {
  let now = 0;
  const controller = createRateController({ maxRate: 30, maxConcurrency: 8 }, { now: () => now });
  const refused: number[] = [];
  const accepted: number[] = [];
  while (now < seconds * 1000) {
    if (controller.rate > limit) {
      refused.push(now);
      controller.onRateLimited(now);
    } else {
      accepted.push(now);
      controller.onSuccess(now, 20);
    }
    now += 1000 / controller.rate;
  }
  return { controller, refused, accepted };
}

describe('probing past a learned limit', () => {
  it('probes 15 s after reaching the limit, then half as often after each probe that failed (at most every 2 min)', () => {
    const { controller, refused, accepted } = against(10, 600);
    const late = refused.filter((at) => at > 30_000);
    // Every 5 s, as before, a probe failed every 15–20 s for as long as the run lasted: about 30 here.
    expect(late.length).toBeGreaterThanOrEqual(3);
    expect(late.length).toBeLessThanOrEqual(6);
    const gaps = late.slice(1).map((at, i) => (at - (late[i] ?? 0)) / 1000);
    for (const [i, gap] of gaps.entries()) if (i > 0) expect(gap).toBeGreaterThanOrEqual((gaps[i - 1] ?? 0) - 1);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(140);
    // Between probes it is back at the highest rate that held within seconds, not after another wait.
    const lastFive = accepted.filter((at) => at > 300_000).length / 300;
    expect(lastFive).toBeGreaterThan(9.85);
    expect(controller.rate).toBeLessThanOrEqual(10);
  });
});

/**
 * The same controller against a token bucket of `burst` refilled at `limit` per second (the simulator's and, near
 * enough, nginx's `limit_req`): its burst lets a rate a little over the limit hold for seconds before a 429 says so.
 * Answers come at once; the 429's pause is left out (it only delays). Returns the 429s' times, the rate set by each
 * cut, and what was accepted.
 */
function againstBucket(limit: number, burst: number, seconds: number, maxRate = 30, startGapMs = 0, slowStart = false) {
  let now = 0;
  const controller = createRateController({ maxRate, maxConcurrency: 8, slowStart }, { now: () => now });
  let tokens = burst;
  let refilledAt = 0;
  const refused: number[] = [];
  const cuts: number[] = [];
  let accepted = 0;
  let highest = 0;
  while (now < seconds * 1000) {
    tokens = Math.min(burst, tokens + ((now - refilledAt) / 1000) * limit);
    refilledAt = now;
    if (tokens >= 1) {
      tokens -= 1;
      accepted += 1;
      controller.onSuccess(now, 0);
    } else {
      refused.push(now);
      if (controller.onRateLimited(now)) cuts.push(controller.rate);
    }
    if (refused.length >= 3) highest = Math.max(highest, controller.rate);
    // A run slow to start: its first request, then nothing for a while (the bucket stays full meanwhile).
    now += now === 0 && startGapMs > 0 ? startGapMs : 1000 / controller.rate;
  }
  return { refused, cuts, accepted, highest };
}

describe('the first seconds at an unknown limit, behind a burst', () => {
  it('at three times a limit of 10/s with a burst of 2: two 429s at the opening and one crossing, then none for 30 s', () => {
    const { refused, cuts, accepted, highest } = againstBucket(10, 2, 30);
    // Before: the bisection's midpoint held 1–2 s on the burst, counted as held, and the fall back just under it failed
    // again (five 429s, 93 % of the limit here).
    expect(refused.length).toBe(3);
    // The fall back after the crossing is under the limit, and nothing after it goes above.
    expect(cuts[2]).toBeLessThanOrEqual(10);
    expect(highest).toBeLessThanOrEqual(10.5);
    expect(accepted / 300).toBeGreaterThan(0.97);
  });

  it('a raise that held only while the burst hid its excess is not what the rate falls back to', () => {
    for (const limit of [5, 10, 20, 25]) {
      const { refused, cuts } = againstBucket(limit, 3, 60);
      // Every fall back after the opening's two cuts lands at the limit or under (before: just under the raise that
      // had "held", over the limit, and a second 429 followed).
      for (const rate of cuts.slice(2)) expect(rate).toBeLessThanOrEqual(limit * 1.005);
      expect(refused.length).toBeLessThanOrEqual(5);
    }
  });

  it('an opening slow to start still shows the whole burst: the crossing lands at the limit or under', () => {
    // One request, 600 ms of nothing, then 30/s: over the whole opening, fewer were accepted than the limit's share
    // of its time and the burst together, and the burst read as 1 (before) let the raise after the crossing come
    // too soon, the fall back sit over the limit.
    const { refused, cuts } = againstBucket(10, 2, 30, 30, 600);
    expect(refused.length).toBe(3);
    for (const rate of cuts.slice(2)) expect(rate).toBeLessThanOrEqual(10 * 1.005);
  });

  it('a known limit, configured, is never exceeded nor cut', () => {
    const { refused, cuts, accepted } = againstBucket(20, 2, 60, 20);
    expect(refused).toEqual([]);
    expect(cuts).toEqual([]);
    expect(accepted).toBeGreaterThanOrEqual(1200);
  });
});

describe('a small limit, where the burst hides seconds of excess (a pool’s slowest key)', () => {
  it('a failed raise from a rate that never showed it held steps down near the limit, not to what the burst cannot hide', () => {
    // 24/s into a limit of 2 behind a burst of 3: the opening's halvings end at 3/s, which holds a second on the burst;
    // the raise after it fails. Before: back to the floor (3/s less the burst over a second: nothing), held up by the
    // least rate (1.2/s), and the limit's bracket set at 1.4/s: the key crept back at 0.04/s a step, 15 s apart.
    const { refused, cuts, accepted } = againstBucket(2, 3, 30, 24);
    for (const rate of cuts.slice(3)) expect(rate).toBeGreaterThanOrEqual(2 * 0.9);
    expect(accepted / 60).toBeGreaterThan(0.95);
    expect(refused.length).toBeLessThanOrEqual(8);
  });

  it('the same at limits of 3 and 4; at 8 and 10 no more 429s than before', () => {
    for (const limit of [3, 4]) {
      const { cuts, accepted } = againstBucket(limit, 3, 30, 24);
      for (const rate of cuts.slice(3)) expect(rate).toBeGreaterThanOrEqual(limit * 0.9);
      expect(accepted / (30 * limit)).toBeGreaterThan(0.95);
    }
    for (const limit of [8, 10]) expect(againstBucket(limit, 3, 30, 24).refused.length).toBeLessThanOrEqual(4);
  });
});

describe('429s in a row near a limit learned while saturated', () => {
  it('step down 10 % each, not by half as at the start', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 24, maxConcurrency: 4, minRate: 1.2 }, { now: () => now });
    // 24/s into a limit of 2 (burst 2), answered at once, until the server's limit is learned from what it accepted.
    let tokens = 2;
    let refilledAt = 0;
    while (controller.ceiling === undefined && now < 30_000) {
      tokens = Math.min(2, tokens + ((now - refilledAt) / 1000) * 2);
      refilledAt = now;
      if (tokens >= 1) {
        tokens -= 1;
        controller.onSuccess(now, 0);
      } else controller.onRateLimited(now);
      now += 1000 / controller.rate;
    }
    expect(controller.ceiling).toBeDefined();
    // Two more 429s a few seconds apart, with no raise between (the bucket still short after a burst of sends).
    const before = controller.rate;
    now += 3000;
    controller.onRateLimited(now);
    const first = controller.rate;
    now += 3000;
    controller.onRateLimited(now);
    expect(first).toBeGreaterThanOrEqual(before * 0.85);
    // Before: the second halved (2.19 to 1.2/s, the least rate, for a pool's 2/s key in the nginx runs).
    expect(controller.rate).toBeGreaterThanOrEqual(first * 0.85);
  });
});

describe('a key seldom busy (a pool’s, the others taking the work)', () => {
  it('is not raised on "sustained success" while it sends at a fraction of its rate, only given concurrency; used, it is', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 24, maxConcurrency: 8 }, { now: () => now });
    // Answers 200 ms after their send. The opening: three accepted at 24/s, then a 429: halved to 12/s.
    const answer = (sentAt: number) => {
      now = sentAt + 200;
      controller.onSuccess(sentAt, 200);
    };
    for (const sentAt of [0, 42, 84]) answer(sentAt);
    now = 130;
    controller.onRateLimited(126);
    expect(controller.rate).toBe(12);
    // Then one request a second for 10 s: 12/s shows nothing of the limit. Before: raised to 17.6/s after a second,
    // then on (in the nginx runs, a key of 4/s so raised paid for it in 429s once the work came its way).
    const concurrency = controller.concurrency;
    for (let sentAt = 1000; sentAt < 11_000; sentAt += 1000) answer(sentAt);
    expect(controller.rate).toBe(12);
    expect(controller.concurrency).toBeGreaterThan(concurrency);
    // Used at its rate over a window (3 s), it is raised as before.
    for (let sentAt = 11_000; sentAt < 15_000; sentAt += 1000 / 12) answer(sentAt);
    expect(controller.rate).toBeGreaterThan(12);
  });
});

describe('a 429 at a rate the server was known to allow', () => {
  it('steps down a little instead of to the accepted rate, which the opening and the pauses make read low', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 30, maxConcurrency: 8 }, { now: () => now });
    // The opening and the crossing: 30/s into a limit of 10 with a burst of 2, answered at once.
    let tokens = 2;
    let refilledAt = 0;
    let refused = 0;
    while (refused < 3) {
      tokens = Math.min(2, tokens + ((now - refilledAt) / 1000) * 10);
      refilledAt = now;
      if (tokens >= 1) {
        tokens -= 1;
        controller.onSuccess(now, 0);
      } else {
        refused += 1;
        controller.onRateLimited(now);
      }
      now += 1000 / controller.rate;
    }
    const settled = controller.rate;
    expect(settled).toBeLessThanOrEqual(10.05);
    // The 429's pause, then two sends bunched by a late timer into a bucket not yet refilled: a 429 at the rate the
    // server is known to allow, a second after the crossing.
    now += 250;
    controller.onSuccess(now, 0);
    now += 50;
    controller.onRateLimited(now);
    // Before: cut to the accepted rate of the last 3 s (the opening's cuts and the pause in it), 7.1/s here.
    expect(controller.rate).toBeGreaterThanOrEqual(settled * 0.9 - 1e-9);
  });
});

describe('a 429 right after a cut', () => {
  it('is the old rate’s: the bucket it emptied has not refilled one request at the new rate yet', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 30, maxConcurrency: 8 }, { now: () => now });
    for (; now < 100; now += 33) controller.onSuccess(now, 0);
    controller.onRateLimited(now);
    now += 200;
    controller.onRateLimited(now);
    const cut = controller.rate;
    expect(cut).toBe(7.5);
    // The pause was short: the next request leaves 20 ms after the cut, into the empty bucket.
    now += 20;
    expect(controller.onRateLimited(now)).toBe(false);
    expect(controller.rate).toBe(cut);
    // One sent a full interval after the cut is the new rate's own.
    now += 1000 / cut;
    expect(controller.onRateLimited(now)).toBe(true);
    expect(controller.rate).toBeLessThan(cut);
  });
});

describe('the run’s first 429 after seconds at the configured rate', () => {
  it('steps down 10 %, not by half: the rate held that long, a burst cannot hide 3x over a limit', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 20, maxConcurrency: 8 }, { now: () => now });
    for (; now < 17_000; now += 50) controller.onSuccess(now, 200);
    controller.onRateLimited(now);
    // Before: 10/s, half of a limit the run had held for 17 s (a 429 of jitter at a known limit cost (a) 0.89).
    expect(controller.rate).toBeCloseTo(18, 5);
  });

  it('in the first seconds it still halves: at three times a limit, the burst is what held', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 30, maxConcurrency: 8 }, { now: () => now });
    for (; now < 130; now += 33) controller.onSuccess(now, 200);
    controller.onRateLimited(now);
    expect(controller.rate).toBe(15);
  });
});

describe('a 429 before any answer could be timed', () => {
  it('keeps the concurrency, so that the rate it falls back to is tried and not hidden under a halved concurrency', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 30, maxConcurrency: 4 }, { now: () => now });
    // nginx's limit_req answers a 429 at once: the first answer of the run is one, before any 200 came back.
    now = 40;
    controller.onRateLimited(10);
    expect(controller.rate).toBe(15);
    // Before: 2, which at 200 ms answers sends 10/s at most, whatever the rate: 15/s then seemed to hold.
    expect(controller.concurrency).toBe(4);
  });

  it('still cuts the concurrency to what the new rate needs once answers are timed', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 30, maxConcurrency: 8 }, { now: () => now });
    for (; now < 130; now += 33) controller.onSuccess(now, 200);
    controller.onRateLimited(now);
    // 15/s at 200 ms answers needs 7 in flight (twice the latency's worth, and one more): 8 becomes 7.
    expect(controller.rate).toBe(15);
    expect(controller.concurrency).toBe(7);
  });
});

describe('a slow start (a pool’s key with nothing known of its limit)', () => {
  it('starts at an eighth of the configured rate and doubles while no 429 comes, up to the configured rate', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 24, maxConcurrency: 4, slowStart: true }, { now: () => now });
    const rates = [controller.rate];
    while (now < 10_000) {
      controller.onSuccess(now, 0);
      if (controller.rate !== rates.at(-1)) rates.push(controller.rate);
      now += 1000 / controller.rate;
    }
    expect(rates).toEqual([3, 6, 12, 24]);
  });

  it('a step doubles once 4 requests sent at it were accepted, not on the clock alone (a process held up by its machine)', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 24, maxConcurrency: 4, slowStart: true }, { now: () => now });
    // At 3/s, a first request, then the process held up for 1.4 s, then two more: 1.45 s at the step, 3 requests.
    for (const sentAt of [0, 1400, 1450]) {
      now = sentAt;
      controller.onSuccess(sentAt, 0);
    }
    // Before: doubled to 6 on its 1.33 s (seen behind nginx at load 11–18: a 2/s key doubled from 3 it had barely used,
    // fell back from 6 to 4.59, and paid 7 429s on the way down).
    expect(controller.rate).toBe(3);
    now = 1500;
    controller.onSuccess(1500, 0);
    expect(controller.rate).toBe(6);
  });

  it('crosses a limit once: one 429 a key at the crossing, the fall back under the limit, and few after it', () => {
    for (const limit of [2, 4, 8, 10]) {
      const { refused, cuts, accepted } = againstBucket(limit, 2, 30, 24, 0, true);
      // Before (a start at the configured rate, halving down to the limit, the bucket full at each half): 3–4 429s in
      // the first seconds alone (at 2/s: 24, 12, 6, 3 and 2.7 all refused).
      expect(refused.filter((at) => at < 5000).length, `limit ${limit}`).toBe(1);
      expect(cuts[0], `limit ${limit}`).toBeLessThanOrEqual(limit);
      expect(refused.length, `limit ${limit}`).toBeLessThanOrEqual(3);
      expect(accepted / (30 * limit), `limit ${limit}`).toBeGreaterThan(0.9);
    }
  });

  it('a 429 met right after a doubling is the rate before it failing, not the doubled rate’s', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 24, maxConcurrency: 4, slowStart: true }, { now: () => now });
    while (controller.rate < 12) {
      controller.onSuccess(now, 0);
      now += 1000 / controller.rate;
    }
    // Sent 50 ms after the doubling from 6 to 12, less than one interval of the 6/s: the 6/s filled the bucket (against
    // nginx: a 4/s key, taken for the 12's, fell back to 5.88 and paid three more 429s).
    controller.onRateLimited(now - 1000 / 12 + 50);
    expect(controller.rate).toBeLessThanOrEqual(3);
  });

  it('after a step that held, 429s step down a tenth at a time: none halves (the limit is over that step)', () => {
    let now = 0;
    const controller = createRateController({ maxRate: 24, maxConcurrency: 4, slowStart: true }, { now: () => now });
    while (controller.rate < 12) {
      controller.onSuccess(now, 0);
      now += 1000 / controller.rate;
    }
    controller.onRateLimited(now + 500);
    // 429s seconds apart, as an 8/s key behind nginx met them after falling back over its limit: before, the third
    // halved it (8.4 to 4.2), and the key ran at 0.83 of its limit.
    for (let i = 1; i <= 3; i++) {
      // Four seconds of answers accepted at the rate in between: one 429 in them is too few to learn a limit from.
      for (const until = now + 4000; now < until; now += 1000 / controller.rate) controller.onSuccess(now, 0);
      const before = controller.rate;
      controller.onRateLimited(now);
      // 0.85 until the slow start's fall back was counted again once its answers were in: the first 4 s now hold that
      // fall back (to 6, what held) and a raise from it to 8.8, and the 429 after it goes back to just under what
      // held, 7.3 (0.82 of the raise), not a tenth down; none halves.
      expect(controller.rate, `429 ${i}`).toBeGreaterThanOrEqual(before * 0.8);
    }
    expect(controller.rate).toBeGreaterThan(6 * 0.85);
  });

  it('falls back, once the answers on their way at its first 429 are in, to what the failed doubling showed: the limit or under', () => {
    // nginx's limit_req at 8 r/s, burst 2, nodelay (the bench's zones): a request is refused, at once, when the excess
    // it would bring (the last excess, less 8 a second since, plus one) is over 2; an accepted one is answered 200 ms
    // later (the upstream's latency).
    const [limit, burst, latencyMs] = [8, 2, 200];
    let now = 0;
    const controller = createRateController({ maxRate: 24, maxConcurrency: 8, slowStart: true }, { now: () => now });
    let excess = 0;
    let lastAt = 0;
    const onTheirWay: number[] = [];
    const refused: number[] = [];
    let settled: number | undefined;
    while (now < 20_000) {
      while (onTheirWay.length > 0 && (onTheirWay[0] as number) + latencyMs <= now) controller.onSuccess(onTheirWay.shift() as number, latencyMs);
      if (refused.length > 0 && settled === undefined && now >= (refused[0] as number) + 1000) settled = controller.rate;
      const next = Math.max(0, excess - (limit * (now - lastAt)) / 1000) + 1;
      if (next > burst) {
        refused.push(now);
        controller.onRateLimited(now);
      } else {
        [excess, lastAt] = [next, now];
        onTheirWay.push(now);
      }
      now += 1000 / controller.rate;
    }
    // Before: counted at the 429, with the doubled rate's last answers still on their way, the burst read small and
    // the fall back was 9.3 (as against nginx: 9.3–9.75), over the limit, then 8.1 after a second 429 and 7.8 after a
    // third (at 2.7, 3.3 and 9.2 s). After: 6, the step that held (what the doubling showed, counted whole, is under it),
    // then a raise to 8.1 fails once (5.4 s) and 7.9 holds.
    expect(settled).toBeLessThanOrEqual(limit);
    expect(refused.length).toBeLessThanOrEqual(2);
  });

  it('ends at once when the server tells its limits (rate-limit headers): the configured rate, for the headers to pace', () => {
    const controller = createRateController({ maxRate: 24, maxConcurrency: 4, slowStart: true }, { now: () => 0 });
    expect(controller.rate).toBe(3);
    expect(controller.told()).toBe(true);
    expect(controller.rate).toBe(24);
    expect(controller.told()).toBe(false);
  });

  it('is not for a rate configured at 2/s or under, nor for a key started at what an earlier run knew', () => {
    expect(createRateController({ maxRate: 2, maxConcurrency: 4, slowStart: true }, { now: () => 0 }).rate).toBe(2);
    expect(createRateController({ maxRate: 24, maxConcurrency: 4, slowStart: true, start: { rate: 7.8, above: 8.4, trusted: true } }, { now: () => 0 }).rate).toBe(7.8);
  });
});
