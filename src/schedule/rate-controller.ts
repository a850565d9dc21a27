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
  const { maxRate, maxConcurrency } = options;
  const increaseEveryMs = options.increaseEveryMs ?? 1000;
  const windowMs = options.windowMs ?? 3000;
  const minRate = options.minRate ?? 0.05;
  const learnAfterMs = options.learnAfterMs ?? 1000;

  let rate = maxRate;
  let concurrency = maxConcurrency;
  /** The highest rate that held for a sustained period without a 429. */
  let good: number | undefined;
  /** The lowest rate that earned a 429 (the limit is below it). */
  let bad: number | undefined;
  let ceiling: number | undefined;
  let lastChangeAt = clock.now();
  let lastCutAt = Number.NEGATIVE_INFINITY;
  let latency: number | undefined;
  let cap: { rate: number; until: number } | undefined;
  /** Whether the last raise was a probe past the learned limit. */
  let probing = false;
  let probeEveryMs = PROBE_EVERY_MS.first;
  // Send times of accepted and of rejected requests, newest last, bounded.
  const accepted: number[] = [];
  const rejected: number[] = [];

  const push = (list: number[], at: number) => {
    list.push(at);
    if (list.length > SAMPLE_LIMIT) list.splice(0, list.length - SAMPLE_LIMIT);
  };
  const since = (list: number[], from: number) => list.filter((t) => t >= from).length;

  /**
   * The server's limit, learned from what it accepted over the window, but only while it was rejecting a fair
   * share of what was sent (saturated): otherwise the accepted rate is merely our own rate.
   */
  const saturatedRate = (now: number): number | undefined => {
    const from = now - windowMs;
    const ok = since(accepted, from);
    const refused = since(rejected, from);
    const first = Math.min(accepted.find((t) => t >= from) ?? now, rejected.find((t) => t >= from) ?? now);
    const span = now - first;
    if (ok < 5 || span < learnAfterMs || refused / (ok + refused) < 0.05) return undefined;
    return (ok / span) * 1000;
  };

  /** Attempts per second over the window (accepted and rejected), when there are a few to go on. */
  const sendingRate = (now: number): number | undefined => {
    const from = now - windowMs;
    const all = [...accepted, ...rejected].filter((t) => t >= from);
    const span = now - Math.min(...all);
    return all.length >= 2 && span >= 100 ? (all.length / span) * 1000 : undefined;
  };

  const neededConcurrency = () => (latency === undefined || !Number.isFinite(rate) ? 1 : Math.ceil((rate * latency * 2) / 1000) + 1);

  return {
    get rate() {
      return cap && clock.now() < cap.until ? Math.min(rate, cap.rate) : rate;
    },
    get concurrency() {
      return concurrency;
    },
    get ceiling() {
      return ceiling;
    },

    onSuccess(sentAt, latencyMs) {
      const now = clock.now();
      push(accepted, sentAt);
      latency = latency === undefined ? latencyMs : latency * 0.8 + latencyMs * 0.2;
      // Near the lowest rate that failed, success must last longer before it counts: a server's burst allowance
      // hides a rate slightly above its limit for a few seconds.
      // The first raise after a cut waits a little longer too, for the same reason: the rate we fell back to may
      // itself be a little too high, and only a few seconds tell.
      const near = bad !== undefined && rate >= bad * 0.95;
      // Near it and at the highest rate that held, the next raise is a probe past the limit: it waits its turn.
      const probe = near && rate >= (good ?? 0);
      const settle = probe ? Math.max(increaseEveryMs * 5, probeEveryMs) : near ? increaseEveryMs * 5 : lastChangeAt === lastCutAt ? increaseEveryMs * 3 : increaseEveryMs;
      if (now - lastChangeAt < settle || (rate >= maxRate && concurrency >= maxConcurrency)) return false;
      lastChangeAt = now;
      const highest = good;
      good = Math.max(good ?? 0, rate);
      probing = false;
      let next: number;
      if (bad === undefined) {
        // No limit seen yet: close half the gap to the configured rate.
        next = rate + Math.max((maxRate - rate) / 2, rate * 0.02);
      } else if (rate < bad * 0.95) {
        // Far below the lowest rate that failed: halve the gap (a bisection between good and bad).
        next = rate + Math.max((bad * 0.97 - rate) / 2, rate * 0.02);
      } else if (!probe && highest !== undefined) {
        // Back from a failed probe: up to the highest rate that held, no further, at the pace near the limit.
        next = Math.min(rate * 1.01, highest);
      } else {
        // Close to it: probe upwards slowly, in case the limit rose.
        next = rate * 1.01;
        bad = Math.max(bad, next);
        probing = true;
      }
      rate = Math.min(maxRate, next);
      concurrency = Math.min(maxConcurrency, concurrency + 1);
      return true;
    },

    onRateLimited(sentAt) {
      const now = clock.now();
      push(rejected, sentAt);
      // Requests sent before the last cut were paced under the old rate: their 429s are already answered.
      if (sentAt < lastCutAt) return false;
      // With no rate configured, the rate that earned the 429 is the one we were actually sending at.
      const at = Number.isFinite(rate) ? rate : (sendingRate(now) ?? 10);
      bad = Math.min(bad ?? at, at);
      const learned = saturatedRate(now);
      if (learned !== undefined) ceiling = learned;
      if (good !== undefined && good < at) {
        // Right after a raise: the limit lies between the last rate that held and this one. Go back just under the
        // former (the accepted rate is no guide here: it still includes the server's burst allowance).
        rate = good * 0.98;
        // A probe that failed: the limit has not risen; the next probe waits twice as long.
        if (probing) probeEveryMs = Math.min(PROBE_EVERY_MS.max, probeEveryMs * 2);
      } else {
        // At a rate that used to hold, or with nothing known yet: the limit is lower than we thought. Trust what the
        // server accepted while saturated; else step down a little if a rate ever held, or halve at the start.
        const held = good !== undefined;
        good = undefined;
        rate = learned !== undefined ? Math.min(learned * 0.97, at * 0.9) : held ? at * 0.9 : at * 0.5;
      }
      if (!Number.isFinite(rate)) rate = 1;
      rate = Math.max(minRate, Math.min(maxRate, rate));
      concurrency = Math.max(1, Math.min(concurrency, Math.max(Math.ceil(concurrency / 2), neededConcurrency())));
      lastCutAt = now;
      lastChangeAt = now;
      probing = false;
      return true;
    },

    capUntil(next, until) {
      const before = cap?.rate;
      cap = { rate: Math.max(minRate, next), until };
      return before !== cap.rate;
    },
  };
}
