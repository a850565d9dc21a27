/**
 * A slow start (TCP's): a key with nothing known of its limit starts at a fraction of its configured rate and doubles
 * it while no 429 comes, so that it crosses its limit once, from below, with the server's bucket near empty — one 429
 * where a start at the configured rate paid one per halving down to the limit (the bucket still full when each half
 * was tried: 2 to 4 a key of a pool, docs/benchmarks.md#key-pools). The controller (rate-controller.ts) then falls
 * back to the rate that held and raises carefully from there, as after any failed raise.
 */

import type { Burst, Unproven } from './burst.ts';

/**
 * The first rate: the configured rate over DIVISOR, and not under AT_LEAST (a rate configured at or under it has no
 * slow start: its climb would cost more seconds than its 429s would; at 2/s, 4 requests a step are 2 s a step).
 */
const DIVISOR = 8;
const AT_LEAST = 2;
/**
 * A rate holds this long, and for this many requests at least, before it doubles: long enough for a bucket of 2 or 3
 * to show an excess of a third or more (a rate over its limit by less than the burst over this time is not seen).
 */
const HOLD_MS = 1000;
const HOLD_REQUESTS = 4;

/** A step of the slow start: from `at`, `rate`. */
export interface SlowStep {
  at: number;
  rate: number;
}

export class SlowStart {
  /** The rates it went through, oldest first. */
  readonly #steps: SlowStep[];
  readonly #maxRate: number;

  constructor(now: number, maxRate: number, minRate: number) {
    this.#maxRate = maxRate;
    this.#steps = [{ at: now, rate: SlowStart.first(maxRate, minRate) }];
  }

  /** The rate a slow start begins at, under a configured `maxRate`: none when it is not under it. */
  static first(maxRate: number, minRate: number): number {
    return Math.min(maxRate, Math.max(minRate, maxRate / DIVISOR, AT_LEAST));
  }

  get rate(): number {
    return (this.#steps.at(-1) as SlowStep).rate;
  }

  /**
   * The next rate after holding the current one until `now` without a 429, or undefined while it has not held long
   * enough: HOLD_MS, and HOLD_REQUESTS sent at it and accepted (`accepted(since)` counts those sent since a time). Time
   * alone is not a hold: a process held up by its machine (load 11–18 on two cores) sent 3 requests in 1.3 s at 3/s,
   * doubled on the clock, and its 2/s key fell back from a 6 it never held (docs/benchmarks.md#key-pools-under-load).
   */
  next(now: number, accepted: (since: number) => number): number | undefined {
    const { at, rate } = this.#steps.at(-1) as SlowStep;
    if (now - at < Math.max(HOLD_MS, (HOLD_REQUESTS * 1000) / rate) || accepted(at) < HOLD_REQUESTS) return undefined;
    const next = Math.min(this.#maxRate, rate * 2);
    this.#steps.push({ at: now, rate: next });
    return next;
  }

  /**
   * A step, once the rate held (and was used) until `now`: the rate doubles (at the configured rate, `last`: the slow
   * start is over). The rate it doubles from is what held, and the doubling a raise into rates that never held: the
   * first 429 falls back as after a failed raise (to what held, or what the doubling showed of the limit).
   */
  doubled(now: number, accepted: (since: number) => number): { held: number; rate: number; unproven: Unproven; last: boolean } | undefined {
    const held = this.rate;
    const rate = this.next(now, accepted);
    if (rate === undefined) return undefined;
    return { held, rate, unproven: { at: now, from: held, rate, fromHeld: true }, last: rate >= this.#maxRate };
  }

  /**
   * The slow start's first 429, for a request sent at `sentAt`: the rate it was sent at failed, a raise from the step
   * before it (what held); with no step before, nothing held, and the controller cuts as at a limit never seen.
   */
  ended(sentAt: number): { rate: number; held: number | undefined; unproven: Unproven | undefined } {
    const { failed, held } = this.failed(sentAt);
    return { rate: failed.rate, held: held?.rate, unproven: held ? { at: failed.at, from: held.rate, rate: failed.rate, fromHeld: true } : undefined };
  }

  /**
   * A 429 for a request sent at `sentAt`: the step it was sent at (the rate that failed) and the one before it (what
   * held), if any. A 429 sent before the last doubling, or within one interval of the rate before it after (before the
   * doubled rate could add a request of its own to the server's bucket), was the rate before it failing, its bucket
   * slow to fill: against nginx, a 4/s key doubled from 6 to 12 and met the 429 the 6/s had earned at once, and, taken
   * for the 12's, fell back to 6, over its limit (three more 429s).
   */
  failed(sentAt: number): { failed: SlowStep; held: SlowStep | undefined } {
    const steps = this.#steps;
    let i = steps.length - 1;
    while (i > 0 && (steps[i] as SlowStep).at + 1000 / (steps[i - 1] as SlowStep).rate > sentAt) i -= 1;
    return { failed: steps[i] as SlowStep, held: steps[i - 1] };
  }
}

/** A slow start's failed doubling (`unproven`), and when its first 429 was sent. */
export interface Settling {
  unproven: Unproven;
  sentAt: number;
}

/**
 * The slow start's fall back, counted again at the first answer to a request sent after its first 429 (those sent
 * before it are in by then): what the failed doubling showed of the limit (its rate less the burst over the time it
 * held), the step that held at least. At the 429, the requests the doubled rate had accepted within a latency were
 * still on their way: the burst read small and the fall back high, 9.3–9.75 for nginx's 8 r/s behind 200 ms of latency
 * (two or three more 429s on the way down), where the same run with answers at once fell back to 6.1.
 */
export function settledRate({ unproven, sentAt }: Settling, burst: Burst, minRate: number): number {
  return Math.max(minRate, unproven.from * 0.98, burst.shown(unproven, sentAt));
}
