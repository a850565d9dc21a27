/**
 * Adapts the sending rate and concurrency to what the server accepts.
 *
 * Plain AIMD halves on a 429 and creeps back, so it spends much of a run below the server's limit. This
 * controller brackets the limit instead: the highest rate that held without a 429 ("good") and the lowest that
 * earned one ("bad"). A 429 right after a raise sends it back to the good rate; sustained success bisects towards
 * the bad one, then probes slowly past it, in case the limit rose. While a server rejects a fair share of what is
 * sent, the requests it accepts arrive at its own rate, so their rate estimates the limit directly (the
 * "ceiling"). It never goes above the configured rate or concurrency.
 */
export interface RateController {
  readonly rate: number;
  readonly concurrency: number;
  /** The learned server limit (requests per second), once a 429 taught one. */
  readonly ceiling: number | undefined;
  /** An accepted request, sent at `sentAt`, answered after `latencyMs`. Returns true when rate or concurrency changed. */
  onSuccess(sentAt: number, latencyMs: number): boolean;
  /** A 429 for a request sent at `sentAt`. Returns true when rate or concurrency changed. */
  onRateLimited(sentAt: number): boolean;
  /** An outside cap (rate-limit headers): the rate is held at or below it until `until`. */
  capUntil(rate: number, until: number): boolean;
}

export interface RateControllerOptions {
  /** Configured requests per second (`Infinity`: none configured). */
  maxRate: number;
  maxConcurrency: number;
  /** Sustained success needed between two raises. */
  increaseEveryMs?: number;
  /** The window over which the accepted rate is measured. */
  windowMs?: number;
  /** Never slower than this, so that a run always makes progress. */
  minRate?: number;
  /**
   * How much history the server's limit is learned from, at least (default 1 s). Longer when answers come from other
   * processes too (a distributed run's leader hears them late): a short span of them reads low.
   */
  learnAfterMs?: number;
}

const SAMPLE_LIMIT = 256;
/**
 * Probes past the learned limit: 15 s after reaching it, then half as often after each that failed (a limit rarely
 * rises; each failed probe is a 429), at most every 2 minutes. Probing more often cost 429s for good
 * (docs/benchmarks.md#figures-the-code-cites).
 */
const PROBE_EVERY_MS = { first: 15_000, max: 120_000 };

export function createRateController(options: RateControllerOptions, clock: { now(): number }): RateController {
  return new BracketingController(options, clock);
}

class BracketingController implements RateController {
  readonly #clock: { now(): number };
  readonly #maxRate: number;
  readonly #maxConcurrency: number;
  readonly #increaseEveryMs: number;
  readonly #windowMs: number;
  readonly #minRate: number;
  readonly #learnAfterMs: number;

  /** The learned rate, before an outside cap (`rate` applies the cap). */
  #rate: number;
  #concurrency: number;
  /** The highest rate that held for a sustained period without a 429. */
  #good: number | undefined;
  /** The lowest rate that earned a 429 (the limit is below it). */
  #bad: number | undefined;
  #ceiling: number | undefined;
  #lastChangeAt: number;
  #lastCutAt = Number.NEGATIVE_INFINITY;
  #latency: number | undefined;
  #cap: { rate: number; until: number } | undefined;
  /** Whether the last raise was a probe past the learned limit. */
  #probing = false;
  #probeEveryMs = PROBE_EVERY_MS.first;
  // Send times of accepted and of rejected requests, newest last, bounded.
  readonly #accepted: number[] = [];
  readonly #rejected: number[] = [];

  constructor(options: RateControllerOptions, clock: { now(): number }) {
    this.#clock = clock;
    this.#maxRate = options.maxRate;
    this.#maxConcurrency = options.maxConcurrency;
    this.#increaseEveryMs = options.increaseEveryMs ?? 1000;
    this.#windowMs = options.windowMs ?? 3000;
    this.#minRate = options.minRate ?? 0.05;
    this.#learnAfterMs = options.learnAfterMs ?? 1000;
    this.#rate = options.maxRate;
    this.#concurrency = options.maxConcurrency;
    this.#lastChangeAt = clock.now();
  }

  get rate(): number {
    const cap = this.#cap;
    return cap && this.#clock.now() < cap.until ? Math.min(this.#rate, cap.rate) : this.#rate;
  }

  get concurrency(): number {
    return this.#concurrency;
  }

  get ceiling(): number | undefined {
    return this.#ceiling;
  }

  onSuccess(sentAt: number, latencyMs: number): boolean {
    const now = this.#clock.now();
    push(this.#accepted, sentAt);
    this.#latency = this.#latency === undefined ? latencyMs : this.#latency * 0.8 + latencyMs * 0.2;
    const rate = this.#rate;
    const bad = this.#bad;
    // Near the lowest rate that failed, success must last longer before it counts: a server's burst allowance
    // hides a rate slightly above its limit for a few seconds.
    // The first raise after a cut waits a little longer too, for the same reason: the rate we fell back to may
    // itself be a little too high, and only a few seconds tell.
    const near = bad !== undefined && rate >= bad * 0.95;
    // Near it and at the highest rate that held, the next raise is a probe past the limit: it waits its turn.
    const probe = near && rate >= (this.#good ?? 0);
    const increaseEveryMs = this.#increaseEveryMs;
    const settle = probe
      ? Math.max(increaseEveryMs * 5, this.#probeEveryMs)
      : near
        ? increaseEveryMs * 5
        : this.#lastChangeAt === this.#lastCutAt
          ? increaseEveryMs * 3
          : increaseEveryMs;
    if (now - this.#lastChangeAt < settle || (rate >= this.#maxRate && this.#concurrency >= this.#maxConcurrency)) return false;
    this.#lastChangeAt = now;
    const highest = this.#good;
    this.#good = Math.max(this.#good ?? 0, rate);
    this.#probing = false;
    this.#rate = Math.min(this.#maxRate, this.#raised(rate, probe, highest));
    this.#concurrency = Math.min(this.#maxConcurrency, this.#concurrency + 1);
    return true;
  }

  onRateLimited(sentAt: number): boolean {
    const now = this.#clock.now();
    push(this.#rejected, sentAt);
    // Requests sent before the last cut were paced under the old rate: their 429s are already answered.
    if (sentAt < this.#lastCutAt) return false;
    // With no rate configured, the rate that earned the 429 is the one we were actually sending at.
    const failedRate = Number.isFinite(this.#rate) ? this.#rate : (this.#sendingRate(now) ?? 10);
    this.#bad = Math.min(this.#bad ?? failedRate, failedRate);
    const learned = this.#saturatedRate(now);
    if (learned !== undefined) this.#ceiling = learned;
    let rate: number;
    if (this.#good !== undefined && this.#good < failedRate) {
      // Right after a raise: the limit lies between the last rate that held and this one. Go back just under the
      // former (the accepted rate is no guide here: it still includes the server's burst allowance).
      rate = this.#good * 0.98;
      // A probe that failed: the limit has not risen; the next probe waits twice as long.
      if (this.#probing) this.#probeEveryMs = Math.min(PROBE_EVERY_MS.max, this.#probeEveryMs * 2);
    } else {
      // At a rate that used to hold, or with nothing known yet: the limit is lower than we thought. Trust what the
      // server accepted while saturated; else step down a little if a rate ever held, or halve at the start.
      const held = this.#good !== undefined;
      this.#good = undefined;
      rate = learned !== undefined ? Math.min(learned * 0.97, failedRate * 0.9) : held ? failedRate * 0.9 : failedRate * 0.5;
    }
    if (!Number.isFinite(rate)) rate = 1;
    this.#rate = Math.max(this.#minRate, Math.min(this.#maxRate, rate));
    const concurrency = this.#concurrency;
    this.#concurrency = Math.max(1, Math.min(concurrency, Math.max(Math.ceil(concurrency / 2), this.#neededConcurrency())));
    this.#lastCutAt = now;
    this.#lastChangeAt = now;
    this.#probing = false;
    return true;
  }

  capUntil(next: number, until: number): boolean {
    const before = this.#cap?.rate;
    this.#cap = { rate: Math.max(this.#minRate, next), until };
    return before !== this.#cap.rate;
  }

  /** The next rate after sustained success at `rate`; `highest` is the highest rate that held before this one. */
  #raised(rate: number, probe: boolean, highest: number | undefined): number {
    const bad = this.#bad;
    if (bad === undefined) {
      // No limit seen yet: close half the gap to the configured rate.
      return rate + Math.max((this.#maxRate - rate) / 2, rate * 0.02);
    }
    if (rate < bad * 0.95) {
      // Far below the lowest rate that failed: halve the gap (a bisection between good and bad).
      return rate + Math.max((bad * 0.97 - rate) / 2, rate * 0.02);
    }
    if (!probe && highest !== undefined) {
      // Back from a failed probe: up to the highest rate that held, no further, at the pace near the limit.
      return Math.min(rate * 1.01, highest);
    }
    // Close to it: probe upwards slowly, in case the limit rose.
    const next = rate * 1.01;
    this.#bad = Math.max(bad, next);
    this.#probing = true;
    return next;
  }

  /**
   * The server's limit, learned from what it accepted over the window, but only while it was rejecting a fair
   * share of what was sent (saturated): otherwise the accepted rate is merely our own rate.
   */
  #saturatedRate(now: number): number | undefined {
    const from = now - this.#windowMs;
    const ok = since(this.#accepted, from);
    const refused = since(this.#rejected, from);
    const first = Math.min(this.#accepted.find((sentAt) => sentAt >= from) ?? now, this.#rejected.find((sentAt) => sentAt >= from) ?? now);
    const span = now - first;
    if (ok < 5 || span < this.#learnAfterMs || refused / (ok + refused) < 0.05) return undefined;
    return (ok / span) * 1000;
  }

  /** Attempts per second over the window (accepted and rejected), when there are a few to go on. */
  #sendingRate(now: number): number | undefined {
    const from = now - this.#windowMs;
    const all = [...this.#accepted, ...this.#rejected].filter((sentAt) => sentAt >= from);
    const span = now - Math.min(...all);
    return all.length >= 2 && span >= 100 ? (all.length / span) * 1000 : undefined;
  }

  #neededConcurrency(): number {
    const latency = this.#latency;
    return latency === undefined || !Number.isFinite(this.#rate) ? 1 : Math.ceil((this.#rate * latency * 2) / 1000) + 1;
  }
}

function push(list: number[], at: number): void {
  list.push(at);
  if (list.length > SAMPLE_LIMIT) list.splice(0, list.length - SAMPLE_LIMIT);
}

function since(list: number[], from: number): number {
  return list.filter((sentAt) => sentAt >= from).length;
}
