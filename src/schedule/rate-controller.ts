import { Burst, type Unproven } from './burst.ts';
import { type KnownLimit, LimitKnowledge } from './limit-knowledge.ts';
import type { RateStart } from './options.ts';
import { nextRaise } from './next-raise.ts';
import { ProvenLimit } from './proven-limit.ts';
import { SendSamples } from './send-samples.ts';
import { SentRecount } from './sent-recount.ts';
import { type Settling, SlowStart, settledRate } from './slow-start.ts';

export type { KnownLimit } from './limit-knowledge.ts';

/**
 * Adapts the sending rate and concurrency to what the server accepts.
 *
 * Plain AIMD halves on a 429 and creeps back, so it spends much of a run below the server's limit. This
 * controller brackets the limit instead: the highest rate that held without a 429 ("good") and the lowest that
 * earned one ("bad"). A 429 right after a raise sends it back to the good rate; sustained success bisects towards
 * the bad one, then probes slowly past it, in case the limit rose. A server's burst hides a rate a little over its
 * limit for seconds, so a raise into rates that never held must hold a while (longer for a smaller step) before the
 * next, and what held counts for its rate less what the burst (as the run's opening showed it) could have hidden.
 * While a server rejects a fair share of what is sent, the requests it accepts arrive at its own rate, so their rate
 * estimates the limit directly (the "ceiling"). What a 429 and the requests accepted after it prove of the limit
 * (proven-limit.ts) is what a later run starts from when it is more than what held. It never goes above the configured
 * rate or concurrency.
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
  /** The server tells its limits (rate-limit headers): a slow start ends at the configured rate, the headers pace. */
  told(): boolean;
  /** What it knows of the server's limit, for a later run to start from (limit-knowledge.ts). */
  readonly known: KnownLimit | undefined;
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
  /** What an earlier run learned of the limit; used when under the configured rate (else the limit is not ours to meet). */
  start?: RateStart | undefined;
  /** With no start, begin low and double while no 429 comes (slow-start.ts) rather than at the configured rate. */
  slowStart?: boolean;
}

/**
 * Probes past the learned limit: 30 s after reaching it, then half as often after each that failed (a limit rarely
 * rises; each failed probe is a 429), at most every 2 minutes. Probing more often cost 429s for good; at 15 s, the
 * first probe from a rate at the limit failed inside the first 30 s of a run in 4 of 7 runs on nginx
 * (docs/benchmarks.md#figures-the-code-cites).
 */
const PROBE_EVERY_MS = { first: 30_000, max: 120_000 };
/** A remembered limit not trusted (old): the first probe past it comes this soon. */
const UNTRUSTED_PROBE_MS = 5000;
/** Over a remembered rate (by this factor) the limit is assumed to lie when no 429 was remembered with it. */
const ASSUMED_ABOVE = 1.05;
/** A rate counts as used, and so as shown to hold, when requests went out at this share of it at least. */
const BUSY = 0.85;
/** The configured rate held this long before a run's first 429 counts as a rate that held. */
const HELD_AT_START_MS = 5000;
/**
 * A raise that failed after holding t seconds was over the limit by at least this many requests over t, when the
 * opening showed a burst: the bucket held more than the one request it needs when the rate went up, by half a request
 * at least (the rest is the slack of pacing and timers, measured against nginx and the simulator). Without a burst,
 * nothing was hidden.
 */
const LEAST_HIDDEN = 0.5;

export function createRateController(options: RateControllerOptions, clock: { now(): number }): RateController {
  return new BracketingController(options, clock);
}

class BracketingController implements RateController {
  readonly #clock: { now(): number };
  readonly #maxRate: number;
  readonly #maxConcurrency: number;
  readonly #increaseEveryMs: number;
  readonly #minRate: number;

  /** The learned rate, before an outside cap (`rate` applies the cap). */
  #rate: number;
  #concurrency: number;
  /**
   * The highest rate that held for a sustained period without a 429; once a limit was seen, the highest the server is
   * known to allow (what held, less what its burst could have hidden: #floor).
   */
  #good: number | undefined;
  /** The lowest rate that earned a 429 (the limit is below it), or what a raise that failed showed of the limit. */
  #bad: number | undefined;
  #ceiling: number | undefined;
  #lastChangeAt: number;
  /**
   * The last raise into rates that never held: when, and from what rate. Until a 429 or the hold time, the server's
   * burst may be hiding that the new rate is over its limit.
   */
  #unproven: Unproven | undefined;
  /**
   * The highest rate the server is known to allow: a rate held for t seconds, less the opening's burst over t (what the
   * burst could have hidden of an excess meanwhile).
   */
  #floor: number | undefined;
  #firstSentAt = Number.POSITIVE_INFINITY;
  /** The server's burst, as the run's opening showed it. */
  readonly #burst = new Burst();
  #lastCutAt = Number.NEGATIVE_INFINITY;
  #cap: { rate: number; until: number } | undefined;
  /** Whether the last raise was a probe past the learned limit. */
  #probing = false;
  #probeEveryMs = PROBE_EVERY_MS.first;
  readonly #knowledge = new LimitKnowledge();
  readonly #samples: SendSamples;
  /** The least the limit can be, as its 429s and what was accepted after them prove it. */
  readonly #proven: ProvenLimit;
  /** While the rate doubles from low towards the first 429 (undefined: not, or no more). */
  #slow: SlowStart | undefined;
  /** Whether a slow start's step held before its first 429: the limit is over it, and no later 429 halves the rate. */
  #slowHeld = false;
  /** A slow start's failed doubling, counted again once the answers on their way at its 429 are in (#settle). */
  #settling: Settling | undefined;
  /** A failed raise's fall back, counted again from what was sent once it is heard (sent-recount.ts). */
  readonly #recount: SentRecount;

  constructor(options: RateControllerOptions, clock: { now(): number }) {
    this.#clock = clock;
    this.#maxRate = options.maxRate;
    this.#maxConcurrency = options.maxConcurrency;
    this.#increaseEveryMs = options.increaseEveryMs ?? 1000;
    this.#minRate = options.minRate ?? 0.05;
    this.#samples = new SendSamples(options.windowMs ?? 3000, options.learnAfterMs ?? 1000);
    this.#proven = new ProvenLimit(this.#samples, (options.learnAfterMs ?? 1000) > 1000);
    // A leader hears its followers' answers with their reports, up to a second late (learnAfterMs: 2000).
    this.#recount = new SentRecount(this.#samples, this.#burst, Math.max(0, (options.learnAfterMs ?? 1000) - 1000));
    this.#rate = options.maxRate;
    this.#concurrency = options.maxConcurrency;
    this.#lastChangeAt = clock.now();
    const start = options.start;
    if (start && start.rate < options.maxRate) this.#startAt(start);
    else if (options.slowStart && !start && SlowStart.first(options.maxRate, this.#minRate) < options.maxRate) {
      this.#slow = new SlowStart(this.#lastChangeAt, options.maxRate, this.#minRate);
      this.#rate = this.#slow.rate;
    }
  }

  /**
   * Starts at what an earlier run learned: the rate that held as the highest known to hold, the limit above it, so
   * that the next raise is a probe past it (after PROBE_EVERY_MS.first, as at a limit learned now; sooner when the
   * start is not trusted), and a 429 at it steps down a little (trusted) or cuts as a limit that fell.
   */
  #startAt(start: RateStart): void {
    const rate = Math.max(this.#minRate, start.rate);
    this.#rate = rate;
    this.#good = rate;
    // A 429 remembered near the rate bounds the limit; one far above (a pool's key raised while barely used) is no guide.
    const above = start.above ?? Number.POSITIVE_INFINITY;
    this.#bad = above <= rate * 1.1 ? Math.max(above, rate * 1.01) : rate * ASSUMED_ABOVE;
    this.#knowledge.started(start, this.#bad);
    if (start.trusted) this.#floor = rate;
    else this.#probeEveryMs = UNTRUSTED_PROBE_MS;
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

  get known(): KnownLimit | undefined {
    this.#knowledge.proven(this.#proven.now());
    return this.#knowledge.knownAt(this.#rate);
  }

  onSuccess(sentAt: number, latencyMs: number): boolean {
    const now = this.#clock.now();
    this.#firstSentAt = Math.min(this.#firstSentAt, sentAt);
    this.#burst.accepted(sentAt);
    this.#samples.success(sentAt, latencyMs);
    if (this.#slow) return this.#doubled(now);
    if (this.#settling && sentAt > this.#settling.sentAt) return this.#settle(now);
    // A failed raise's fall back is judged again once what was sent before its 429 is heard; no raise before that.
    const recounted = this.#recount.due(now);
    if (recounted === 'waiting') return false;
    if (recounted !== undefined) return this.#settleAt(recounted.rate, now, recounted.above);
    const rate = this.#rate;
    const bad = this.#bad;
    // Near the lowest rate that failed, success must last longer before it counts: a server's burst
    // hides a rate slightly above its limit for a few seconds. A raise into rates that never held waits for its hold
    // time (Burst.holdMs) before the next.
    const near = bad !== undefined && rate >= bad * 0.95;
    // Near it and at the highest rate that held, the next raise is a probe past the limit: it waits its turn.
    const probe = near && rate >= (this.#good ?? 0);
    const increaseEveryMs = this.#increaseEveryMs;
    const settle = probe ? Math.max(increaseEveryMs * 5, this.#probeEveryMs) : near ? increaseEveryMs * 5 : increaseEveryMs;
    if (now - this.#lastChangeAt < Math.max(settle, this.#burst.holdMs(this.#unproven)) || (rate >= this.#maxRate && this.#concurrency >= this.#maxConcurrency)) return false;
    // A rate hardly used shows nothing of the limit: a key of a pool the others kept the work from, raised on its
    // "sustained success", went from 12 to 17.6/s against a limit of 4 (and 429s followed once it was used). It is
    // given room in concurrency only, in case that is what held its sending back.
    if (!this.#busy(now)) {
      if (this.#concurrency >= this.#maxConcurrency) return false;
      this.#lastChangeAt = now;
      this.#concurrency += 1;
      return true;
    }
    // Held since it was set: once a limit was seen, it is at least this rate less what the burst could have hidden.
    if (this.#bad !== undefined) this.#floor = Math.max(this.#floor ?? 0, Math.min(rate, this.#burst.shown({ at: this.#lastChangeAt, from: rate, rate, fromHeld: true }, now)));
    this.#recount.held(this.#lastChangeAt, now, rate);
    this.#lastChangeAt = now;
    if (this.#bad !== undefined) this.#knowledge.held(Math.min(rate, this.#floor ?? rate), this.#samples.sendingRate(now));
    const highest = this.#good;
    // Once a limit was seen, what held is what the server is known to allow, not the rate: a burst hides excess.
    this.#good = Math.max(this.#good ?? 0, this.#floor ?? rate);
    const raise = nextRaise(rate, this.#bad, this.#maxRate, probe, highest);
    [this.#bad, this.#probing] = [raise.bad, raise.probing];
    this.#rate = Math.min(this.#maxRate, raise.rate);
    // Whether the rate it was raised from is known to be allowed: held long enough that the burst could not hide an
    // excess. A small key's rate holds for seconds behind a burst of 2 or 3 whatever its excess (the floor reads low).
    const fromHeld = this.#good >= rate * 0.9;
    this.#unproven = this.#bad !== undefined && this.#rate > this.#good ? { at: now, from: rate, rate: this.#rate, fromHeld } : undefined;
    this.#concurrency = Math.min(this.#maxConcurrency, this.#concurrency + 1);
    return true;
  }

  onRateLimited(sentAt: number): boolean {
    const now = this.#clock.now();
    this.#firstSentAt = Math.min(this.#firstSentAt, sentAt);
    // The run's first 429 at the configured rate, soon after the start: what was accepted before it is the burst
    // and the limit's share of that time, at most.
    // So is a slow start's first 429, whenever it comes: the bucket filled from near empty at the rate that failed.
    if (!this.#burst.opened && this.#bad === undefined && (sentAt - this.#firstSentAt <= 5000 || this.#slow)) this.#burst.open(sentAt, this.#samples.accepted);
    this.#samples.refusal(sentAt, now);
    if (this.#slow) this.#endSlowStart(sentAt);
    this.#knowledge.proven(this.#proven.refused(sentAt, Number.isFinite(this.#rate) ? this.#rate : undefined));
    // Requests sent before the last cut were paced under the old rate: their 429s are already answered. So are those
    // sent before the bucket the old rate emptied could refill one request at the new rate (seen on the loaded
    // machine: a 429 right after the second cut halved 7.5 r/s against a limit of 10, and the run ended at 0.64).
    if (sentAt < this.#lastCutAt + (Number.isFinite(this.#rate) ? 1000 / this.#rate : 0)) return false;
    // With no rate configured, the rate that earned the 429 is the one we were actually sending at.
    const failedRate = Number.isFinite(this.#rate) ? this.#rate : (this.#samples.sendingRate(now) ?? 10);
    this.#recount.cut();
    const first = this.#bad === undefined;
    this.#bad = Math.min(this.#bad ?? failedRate, failedRate);
    const learned = this.#samples.saturatedRate(now);
    if (learned !== undefined) this.#ceiling = learned;
    let rate: number;
    let cutFrom: number | undefined;
    // A raise from a rate not known to be allowed failed before its hold showed that rate allowed: the rate before it
    // may be over the limit too (the 429 its own, late behind the burst), and nothing is known to hold. It steps down as
    // at a rate that used to hold (before: down to the floor, what the burst could not hide, near nothing for a small
    // key: 2.8 to 1.2 against a limit of 2, behind a burst of 3).
    const unproven = this.#unproven;
    const fromUnknown = unproven !== undefined && !unproven.fromHeld && this.#burst.shown(unproven, sentAt) < unproven.from;
    if (this.#good !== undefined && this.#good < failedRate && !fromUnknown) {
      // Right after a raise: the limit lies between the last rate that held and this one. Go back just under the
      // former (the accepted rate is no guide here: it still includes the server's burst).
      rate = this.#good * 0.98;
      if (unproven && sentAt > unproven.at) {
        // A raise into rates that never held, failed: what it held until the 429 shows the limit from both sides.
        // Over that time the burst hid at most its size, and at least LEAST_HIDDEN, of the raise's excess.
        const heldMs = sentAt - unproven.at;
        rate = Math.min(failedRate * 0.98, Math.max(this.#floor ?? rate, this.#burst.shown(unproven, sentAt)));
        // What it falls back to is known to be allowed, as far as anything is: it held, or the failed raise shows it.
        this.#floor = Math.max(this.#floor ?? 0, rate);
        this.#good = Math.max(this.#good, this.#floor);
        const hidden = Math.min(LEAST_HIDDEN, Math.max(0, this.#burst.size(unproven.from) - 1));
        this.#bad = Math.max(rate * 1.02, Math.min(this.#bad, unproven.rate - (hidden * 1000) / heldMs));
        // Counted again from what was sent, once heard (a slow start's doubling is, by #settle).
        if (!this.#settling) this.#recount.failed(unproven, sentAt, now);
      }
      // A probe that failed: the limit has not risen; the next probe waits twice as long.
      if (this.#probing) this.#probeEveryMs = Math.min(PROBE_EVERY_MS.max, this.#probeEveryMs * 2);
    } else {
      // At a rate that used to hold, or with nothing known yet: the limit is lower than we thought. Trust what the
      // server accepted while saturated; else step down a little if a rate ever held, or halve at the start. At a
      // rate the server was known to allow (the floor), the 429 is more likely our own sends bunched into a bucket
      // not yet refilled after a cut than a limit that fell, and the accepted rate, pauses and all, reads low: step
      // down a little; if the limit did fall, the next 429 says so.
      // The configured rate held for seconds before the run's first 429 held as much as a raise that held: a burst
      // cannot hide 3x over a limit that long, so this 429 is a slight excess, or jitter, not a third of the limit.
      // Near a limit learned while saturated, a second 429 in a row is not the start's: halved there, a pool's 2/s key
      // went from 2.19 to 1.2/s (its least rate).
      const nearCeiling = this.#ceiling !== undefined && failedRate <= this.#ceiling * 1.5;
      // After a slow start whose step held, the limit lies over that step: halved, an 8/s key went from 8.4 to 4.2
      // against nginx, and ran at 0.83 of its limit.
      const held = this.#good !== undefined || nearCeiling || this.#slowHeld || (first && sentAt - this.#firstSentAt >= HELD_AT_START_MS);
      const allowed = this.#floor !== undefined && failedRate <= this.#floor * 1.02;
      this.#good = undefined;
      rate = learned !== undefined && !allowed ? Math.min(learned * 0.97, failedRate * 0.9) : held ? failedRate * 0.9 : failedRate * 0.5;
      // Stepped down from a rate that did not hold, not halved: whether the new rate holds shows only once the burst
      // had time to drain at its excess, at most the step down. Raised before that, a small key's bisection came back
      // over its limit every second or two (a 429 each).
      if (held) cutFrom = failedRate;
    }
    if (!Number.isFinite(rate)) rate = 1;
    this.#rate = Math.max(this.#minRate, Math.min(this.#maxRate, rate));
    const concurrency = this.#concurrency;
    this.#concurrency = Math.max(1, Math.min(concurrency, Math.max(Math.ceil(concurrency / 2), this.#samples.neededConcurrency(this.#rate, concurrency))));
    this.#lastCutAt = now;
    this.#lastChangeAt = now;
    this.#knowledge.cut(failedRate);
    this.#probing = false;
    this.#unproven = cutFrom !== undefined && cutFrom > this.#rate ? { at: now, from: this.#rate, rate: cutFrom, fromHeld: false, cut: true } : undefined;
    // A 429 at a rate once known to be allowed: the limit fell.
    if (this.#floor !== undefined && failedRate <= this.#floor) this.#floor = undefined;
    return true;
  }

  told(): boolean {
    if (!this.#slow) return false;
    this.#slow = undefined;
    this.#good = undefined;
    this.#unproven = undefined;
    this.#rate = this.#maxRate;
    return true;
  }

  /** A slow start's step (SlowStart.doubled): the rate held since it was set, while used, doubles. */
  #doubled(now: number): boolean {
    const accepted = this.#samples.accepted;
    const step = this.#busy(now) ? this.#slow?.doubled(now, (since) => accepted.filter((sentAt) => sentAt >= since).length) : undefined;
    if (step === undefined) return false;
    this.#good = step.held;
    this.#rate = step.rate;
    this.#lastChangeAt = now;
    this.#unproven = step.unproven;
    if (step.last) this.#slow = undefined;
    return true;
  }

  /** The slow start's first 429 (SlowStart.ended): the controller goes on from the step that failed. */
  #endSlowStart(sentAt: number): void {
    const end = (this.#slow as SlowStart).ended(sentAt);
    this.#slow = undefined;
    this.#rate = end.rate;
    this.#good = end.held;
    this.#unproven = end.unproven;
    this.#slowHeld = end.held !== undefined;
    if (end.unproven) this.#settling = { unproven: end.unproven, sentAt };
  }

  /** The first answer to a request sent after the slow start's first 429: its fall back counted again (settledRate). */
  #settle(now: number): boolean {
    const rate = settledRate(this.#settling as Settling, this.#burst, this.#minRate);
    this.#settling = undefined;
    return this.#settleAt(rate, now);
  }

  /** A fall back counted again: lower, it is the rate, and what the server is known to allow; under `above`, the limit. */
  #settleAt(counted: number, now: number, above?: number): boolean {
    const rate = Math.max(this.#minRate, counted);
    if (above !== undefined && this.#bad !== undefined) this.#bad = Math.max(Math.min(rate, this.#rate) * 1.02, Math.min(this.#bad, above));
    if (rate >= this.#rate) return false;
    this.#rate = rate;
    this.#floor = rate;
    this.#good = rate;
    this.#lastChangeAt = now;
    return true;
  }

  capUntil(next: number, until: number): boolean {
    const before = this.#cap?.rate;
    this.#cap = { rate: Math.max(this.#minRate, next), until };
    return before !== this.#cap.rate;
  }

  /**
   * Whether requests went out near the rate since it was set, over the last window. Paced at 0.99 of it, a key kept
   * busy sends at 0.97 or so; one held back by its concurrency or by the work, at less.
   */
  #busy(now: number): boolean {
    return this.#samples.busy(this.#rate, BUSY, this.#lastChangeAt, now);
  }
}
