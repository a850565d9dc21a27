import { describe, expect, it } from 'vitest';
import { windowTracker } from '../../src/schedule/window-tracker.ts';

// What the headers say, answer by answer: a limit of 50, reset in whole seconds rounded up, as servers send them.
const hint = (remaining: number, resetMs: number, policy?: { rate: number; windowMs: number }, limit = 50) => ({ remaining, resetMs, limit, policies: policy ? [policy] : [] });
const ceilSeconds = (ms: number) => Math.ceil(ms / 1000) * 1000;

describe('telling a fixed window from a bucket by the rate-limit headers', () => {
  it('a window counting down, then starting again from its limit: a fixed window, whose end is bound by the least reset', () => {
    const tracker = windowTracker();
    // A window ending at t = 5000; answers every 70 ms, each taking one.
    let told;
    for (let i = 0, t = 300; t < 5000; i++, t += 70) told = tracker.observe(hint(Math.max(0, 49 - i), ceilSeconds(5000 - t)), t) ?? told;
    expect(told).toBeUndefined();
    expect(tracker.kind).toBeUndefined();
    // The next window: most of the limit back, a reset of most of a window.
    expect(tracker.observe(hint(49, ceilSeconds(10_000 - 5010)), 5010)).toBe('fixed_window');
    for (let t = 5080; t < 6000; t += 70) tracker.observe(hint(48, ceilSeconds(10_000 - t)), t);
    // The end is never before the true one (10 000), and within one spacing of answers of it.
    expect(tracker.windowEnd).toBeGreaterThanOrEqual(10_000);
    expect(tracker.windowEnd).toBeLessThanOrEqual(10_070);
  });

  it('with a policy, a window is told before its end: one taken per answer, where a bucket would have refilled', () => {
    const tracker = windowTracker();
    const policy = { rate: 10, windowMs: 5000 };
    let told;
    for (let i = 0, t = 0; i < 12; i++, t += 50) told = tracker.observe(hint(49 - i, ceilSeconds(5000 - t), policy), t) ?? told;
    expect(told).toBe('fixed_window');
    expect(tracker.windowEnd).toBe(5000);
  });

  it('a bucket: remaining comes back a little between answers, or after it was emptied, with a reset of one token', () => {
    const refilling = windowTracker();
    const policy = { rate: 10, windowMs: 5000 };
    // Sent at 20/s against a refill of 10/s: down one per answer, up one every other.
    let remaining = 20;
    for (let i = 0, t = 0; i < 20; i++, t += 50) {
      remaining -= i % 2 === 0 ? 1 : 0;
      refilling.observe({ remaining, resetMs: ceilSeconds(((50 - remaining) / 10) * 1000), limit: 50, policies: [policy] }, t);
    }
    expect(refilling.kind).toBe('bucket');
    expect(refilling.windowEnd).toBeUndefined();

    const emptied = windowTracker();
    // A bucket of 10 refilling at 10/s, emptied at 50/s: the reset says when it is full again.
    for (let i = 0, t = 0; i < 10; i++, t += 20) emptied.observe(hint(9 - i, ceilSeconds((i + 1) * 100), undefined, 10), t);
    // Waited for until full, it comes back with the time of the one token just taken, not with a window's.
    expect(emptied.observe(hint(9, 100, undefined, 10), 1200)).toBe('bucket');
  });
});
