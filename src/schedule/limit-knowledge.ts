import type { RateStart } from './options.ts';

/** A server's limit as a rate controller knew it: the rate known to hold, and the lowest rate that earned a 429. */
export interface KnownLimit {
  /** Requests a second that held while they were sent at that rate. */
  rate: number;
  /** The lowest rate that earned a 429 (the limit lies under it), when one did. */
  above: number | null;
  /** Learned by this controller (a 429 cut, a rate that held while used), not only given as its start. */
  measured: boolean;
}

/**
 * A rate counts as used when requests went out at this share of it at least: paced at 0.99 of it, a key saturated sends
 * at 0.98 or so; at 0.9 a rate 15 % over a limit of 10 held for seconds behind a burst of 2 and was remembered.
 */
const USED = 0.97;
/**
 * Where a later run starts when no rate held while used: this share of the lowest rate that failed. The lowest failure
 * was up to 1.28 times a limit of 10 in a pool's keys seldom busy (test/run/remembered-limits-run.test.ts); the cut
 * after it, as the controller makes it, was over the limit: 429s again in the next run.
 */
const UNPROVEN_SHARE = 0.75;

/**
 * What a rate controller knows of the limit for a later run to start from (docs/scheduler.md#a-remembered-start),
 * stricter than what it runs at: a rate counts as held only while requests were actually sent at it. A key of a pool
 * (or a run whose sources hold back) may be raised past the limit with no 429, sending at a fraction of its rate;
 * started there, the next run would pay for it (seen: rates of 10.5 to 11.5 remembered against a limit of 10).
 */
export class LimitKnowledge {
  /** The highest rate that held while used (less what the server's burst could hide), or the start's. */
  #held: number | undefined;
  #above: number | undefined;
  /**
   * The least the limit can be, as 429s and what was accepted after them showed it (SendSamples.provenLimit): known to
   * hold, used or not, and preferred to what held.
   */
  #proven: number | undefined;
  #measured = false;

  /** Starts from what an earlier run knew. */
  started(start: RateStart, assumedAbove: number): void {
    this.#held = start.rate;
    this.#above = assumedAbove;
  }

  /** `rate` held until a raise, requests having gone out at `sending` a second meanwhile. */
  held(rate: number, sending: number | undefined): void {
    if (this.#above === undefined || sending === undefined || sending < rate * USED) return;
    this.#held = Math.max(this.#held ?? 0, rate);
    this.#measured = true;
  }

  /** A 429 at `failedRate` (the rate the requests were paced at: bunched at it, they exceed a limit under it). */
  cut(failedRate: number): void {
    this.#above = Math.min(this.#above ?? failedRate, failedRate);
    // A 429 at a rate that held: the limit fell, or never was what it seemed.
    if (this.#held !== undefined && failedRate <= this.#held) this.#held = undefined;
    this.#measured = true;
  }

  /** Two 429s proved the limit at least `rate` (none: what they proved was wrong, the limit fell). */
  proven(rate: number | undefined): void {
    this.#proven = rate;
    if (rate !== undefined) this.#measured = true;
  }

  get known(): KnownLimit | undefined {
    return this.knownAt(Number.POSITIVE_INFINITY);
  }

  /** What is known, the controller running at `running` requests a second now. */
  knownAt(running: number): KnownLimit | undefined {
    const above = this.#above;
    if (above === undefined) return undefined;
    // Nothing held while used (a key of a pool seldom busy, a short run): a guess safely under the rate that failed,
    // and no higher than the rate the controller ended at. The lowest rate that failed is only a bound: a shared
    // pacer's leader brings its rate down to what the fleet's answers show without a 429 at each step, so that it
    // stayed at twice a limit of 4 while the run ran at it (test/distributed/remembered-limits-distributed.test.ts).
    // A proof, when there is one, is what is known, over what held too: it counts what the server accepted, where what
    // held is the rate the pacer was set to, and a busy thread sends behind it (8.05 held, 7.97 sent and proven, against
    // nginx's 8: the next run paid a 429 and ran 10 % under). A proof is the limit within one request over its stretch.
    const rate = Math.min(this.#proven ?? this.#held ?? Math.min(above * UNPROVEN_SHARE, running), above);
    return { rate, above, measured: this.#measured };
  }
}
