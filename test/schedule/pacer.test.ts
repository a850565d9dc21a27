// The pacer (src/schedule/pacer.ts) on a clock of the test's own whose timers fire late, as a busy thread's do.
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/schedule/clock.ts';
import { createPacer } from '../../src/schedule/pacer.ts';

/** A clock whose sleeps end only when the test says, at the time it sets: a thread that was busy meanwhile. */
function stallingClock() {
  let now = 0;
  const sleeping: { at: number; wake: () => void }[] = [];
  const clock: Clock = {
    now: () => now,
    sleep: (ms) => new Promise<void>((resolve) => sleeping.push({ at: now + ms, wake: resolve })),
  };
  return {
    clock,
    /** Time moves to `at`; every timer due by then fires, in order (all of them late when `at` is past their time). */
    async runUntil(at: number) {
      for (;;) {
        sleeping.sort((a, b) => a.at - b.at);
        const next = sleeping[0];
        if (!next || next.at > at) break;
        sleeping.shift();
        now = Math.max(now, next.at, at === Number.POSITIVE_INFINITY ? next.at : 0);
        next.wake();
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (Number.isFinite(at)) now = Math.max(now, at);
    },
    /** Time jumps to `at` with every timer due firing only then, at once: the thread was stalled until `at`. */
    async stallUntil(at: number) {
      now = at;
      for (const timer of sleeping.filter((each) => each.at <= at)) {
        sleeping.splice(sleeping.indexOf(timer), 1);
        timer.wake();
      }
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

describe('the pacer', () => {
  it('after a stall, the slots that came due meanwhile go out an interval apart, not together (a burst the server may refuse)', async () => {
    const t = stallingClock();
    const pacer = createPacer(10, t.clock);
    const sent: number[] = [];
    const take = () => pacer.acquire().then(() => void sent.push(t.clock.now()));
    const all = Promise.all([take(), take(), take(), take()]);
    await new Promise((resolve) => setImmediate(resolve));
    // The first goes at once; the next three are due at 100, 200 and 300 ms, and the thread is busy until 450.
    await t.stallUntil(450);
    await t.runUntil(Number.POSITIVE_INFINITY);
    await all;
    expect(sent[0]).toBe(0);
    // Before: 0, 450, 450, 450 (three at once after the stall).
    const gaps = sent.slice(1).map((at, i) => at - (sent[i] as number));
    expect(gaps[0]).toBeGreaterThanOrEqual(100);
    for (const gap of gaps.slice(1)) expect(gap).toBeGreaterThanOrEqual(90);
  });

  it('timers a few milliseconds late are on time; one later than that delays the next slots a little less each time until the schedule is back', async () => {
    const t = stallingClock();
    const pacer = createPacer(10, t.clock);
    const sent: number[] = [];
    const take = () => pacer.acquire().then(() => void sent.push(t.clock.now()));
    const all = Promise.all([take(), take(), take(), take(), take()]);
    await new Promise((resolve) => setImmediate(resolve));
    await t.stallUntil(105);
    await t.stallUntil(230);
    await t.runUntil(Number.POSITIVE_INFINITY);
    await all;
    // 5 ms late: on time. 30 ms late (230 for 200): the next waits to 320 (an interval less 10 ms), the one after to
    // 410, and the schedule is back (before: 0, 105, 230, 300, 400 — two 70 ms apart).
    expect(sent).toEqual([0, 105, 230, 320, 410]);
  });
});
