/**
 * Adapts the sending rate and concurrency to what the server accepts.
 *
 * Plain AIMD halves on a 429 and creeps back, so it spends much of a run below the server's limit. This
 * controller also learns the limit: while a server rejects, the requests it does accept arrive at its own rate,
 * so the accepted rate over the last few seconds estimates the limit. A 429 sets the rate just under that
 * estimate (the "ceiling"); sustained success climbs back quickly towards the ceiling, then probes slowly past it,
 * in case the limit rose. It never goes above the configured rate or concurrency.
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
}

const SAMPLE_LIMIT = 256;

export function createRateController(options: RateControllerOptions, clock: { now(): number }): RateController {
  const { maxRate, maxConcurrency } = options;
  const increaseEveryMs = options.increaseEveryMs ?? 1000;
  const windowMs = options.windowMs ?? 3000;
  const minRate = options.minRate ?? 0.05;

  let rate = maxRate;
  let concurrency = maxConcurrency;
  let ceiling: number | undefined;
  let lastChangeAt = clock.now();
  let lastCutAt = Number.NEGATIVE_INFINITY;
  let latency: number | undefined;
  let cap: { rate: number; until: number } | undefined;
  // Send times of accepted requests and of every attempt, newest last, bounded.
  const accepted: number[] = [];
  const sent: number[] = [];

  const push = (list: number[], at: number) => {
    list.push(at);
    if (list.length > SAMPLE_LIMIT) list.splice(0, list.length - SAMPLE_LIMIT);
  };

  /** Requests per second among `list` over the window ending at `now`, when there is enough to go on. */
  const rateOf = (list: number[], now: number): number | undefined => {
    const from = now - windowMs;
    const recent = list.filter((t) => t >= from);
    if (recent.length < 5) return undefined;
    const span = now - Math.max(from, recent[0] as number);
    return span >= 500 ? (recent.length / span) * 1000 : undefined;
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
      push(sent, sentAt);
      latency = latency === undefined ? latencyMs : latency * 0.8 + latencyMs * 0.2;
      if (now - lastChangeAt < increaseEveryMs || (rate >= maxRate && concurrency >= maxConcurrency)) return false;
      lastChangeAt = now;
      const target = ceiling === undefined ? maxRate : ceiling * 0.97;
      // Far below the ceiling: close half the gap at once. At or past it: probe upwards by 2%.
      const next = rate < target ? rate + Math.max((target - rate) / 2, rate * 0.02) : rate * 1.02;
      rate = Math.min(maxRate, next);
      concurrency = Math.min(maxConcurrency, concurrency + 1);
      return true;
    },

    onRateLimited(sentAt) {
      const now = clock.now();
      push(sent, sentAt);
      // Requests sent before the last cut were paced under the old rate: their 429s are already answered.
      if (sentAt < lastCutAt) return false;
      const acceptedRate = rateOf(accepted, now);
      if (acceptedRate !== undefined) {
        ceiling = acceptedRate;
        rate = Math.min(rate, acceptedRate) * 0.9;
      } else {
        const sentRate = rateOf(sent, now);
        rate = Math.min(rate, sentRate ?? rate) * 0.5;
        if (!Number.isFinite(rate)) rate = 1;
      }
      rate = Math.max(minRate, Math.min(maxRate, rate));
      concurrency = Math.max(1, Math.min(concurrency, Math.max(Math.ceil(concurrency / 2), neededConcurrency())));
      lastCutAt = now;
      lastChangeAt = now;
      return true;
    },

    capUntil(next, until) {
      const before = cap?.rate;
      cap = { rate: Math.max(minRate, next), until };
      return before !== cap.rate;
    },
  };
}
