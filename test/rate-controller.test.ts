// The rate controller on a clock of the test's own: when it raises, cuts and probes (src/schedule/rate-controller.ts).
import { describe, expect, it } from 'vitest';
import { createRateController } from '../src/schedule/rate-controller.ts';

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
