// What a rate controller measures from its answers (src/schedule/send-samples.ts): here, the least the server's limit
// can be, as its 429s and what it accepted after them prove it, against buckets of the test's own.
import { describe, expect, it } from 'vitest';
import { SendSamples } from '../../src/schedule/send-samples.ts';

/** A token bucket (the simulator's): `burst` tokens, refilled at `limit` a second; a request needs a whole one. */
function tokenBucket(limit: number, burst: number) {
  let tokens = burst;
  let at = 0;
  return (now: number) => {
    tokens = Math.min(burst, tokens + ((now - at) / 1000) * limit);
    at = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };
}

/** nginx's `limit_req` with `burst` and `nodelay`: the excess drains at `limit` a second, a request over `burst` is refused. */
function leakyBucket(limit: number, burst: number) {
  let excess = 0;
  let last: number | undefined;
  return (now: number) => {
    const next = last === undefined ? 0 : Math.max(0, excess + 1 - (limit * (now - last)) / 1000);
    if (next > burst) return false;
    excess = next;
    last = now;
    return true;
  };
}

/** Sends at each rate of `phases` for its seconds, evenly, to `server`; what was accepted and refused, as samples. */
function send(server: (now: number) => boolean, phases: [rate: number, seconds: number][]) {
  const samples = new SendSamples(3000, 1000);
  let now = 0;
  for (const [rate, seconds] of phases) {
    const end = now + seconds * 1000;
    for (; now < end; now += 1000 / rate) {
      if (server(now)) samples.success(now, 0);
      else samples.refusal(now);
    }
  }
  return samples;
}

describe('the limit a 429 and what was accepted after it prove', () => {
  for (const [name, server] of [
    ['a token bucket (the simulator)', (limit: number) => tokenBucket(limit, 2)],
    ['a leaky bucket (nginx, burst 2)', (limit: number) => leakyBucket(limit, 2)],
  ] as const) {
    it(`${name}: never over the limit, and within 4 % of it after 20 s (1 / 20 s of 2 a second is 2.5 %) at it or over, whatever the rates before`, () => {
      for (const limit of [2, 4, 8, 10]) {
        // The opening at three times the limit, a cut under it (the bucket empties: its refills are lost), then at 2 % over.
        const samples = send(server(limit), [
          [limit * 3, 1],
          [limit * 0.8, 3],
          [limit * 1.02, 20],
        ]);
        const proven = samples.provenLimit(3000) as number;
        expect(proven, `limit ${limit}`).toBeLessThanOrEqual(limit);
        expect(proven, `limit ${limit}`).toBeGreaterThan(limit * 0.96);
      }
    });
  }

  it('sent under the limit since the 429: about the rate sent (what a rate under the limit shows of it)', () => {
    const samples = send(tokenBucket(10, 2), [
      [30, 0.5],
      [9, 20],
    ]);
    const proven = samples.provenLimit(3000) as number;
    expect(proven).toBeLessThan(9.2);
    expect(proven).toBeGreaterThan(8.8);
  });

  it('nothing from stretches shorter than asked, nor from 429s before `since`', () => {
    const samples = send(tokenBucket(10, 2), [
      [30, 0.5],
      [9.5, 2],
    ]);
    expect(samples.provenLimit(3000)).toBeUndefined();
    expect(samples.provenLimit(1000)).toBeGreaterThan(8);
    expect(samples.provenLimit(1000, 600)).toBeUndefined();
  });

  it("timed on the safe side of what is known: only requests sent after the 429 was answered count, up to the latest answer", () => {
    const samples = new SendSamples(3000, 1000);
    // A 429 whose request left a busy thread late: sent at 0, answered at 300. Requests every 100 ms, answered 200 ms later.
    samples.refusal(0, 300);
    for (let at = 100; at <= 5000; at += 100) samples.success(at, 200);
    // Counted: those sent at 400 to 5000 (47), over 0 to 5200 (the last answer). By send times alone: 50 over 5 s.
    expect(samples.provenLimit(3000)).toBeCloseTo((46 * 1000) / 5200, 9);
  });
});
