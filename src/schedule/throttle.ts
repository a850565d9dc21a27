import { describeWait } from '../client/retry-after.ts';
import { type Clock, epochOf } from './clock.ts';
import { type RateStart, type ResolvedSchedulerOptions, requestsPerSecond } from './options.ts';
import { createPacer, type Pacer } from './pacer.ts';
import { decidePause } from './pause-rule.ts';
import { type RateLimitHint, readRateLimitHeaders } from './rate-limit-headers.ts';
import { createRateController, type KnownLimit, type RateController } from './rate-controller.ts';
import { windowTracker } from './window-tracker.ts';
import type { HeardOutcomes, ResponseHeaders, SchedulerEvent, StopInfo } from './types.ts';

type AdaptReason = Extract<SchedulerEvent, { type: 'adapt' }>['reason'];
type PauseReason = Extract<SchedulerEvent, { type: 'pause' }>['reason'];

/** The part of the queue the throttle drives: how many requests run at once, and holding all of them back. */
export interface QueueControls {
  concurrency: number;
  pause(): void;
  start(): unknown;
}

/**
 * How fast requests leave: even spacing by the pacer at the rate the controller learns from the server's answers,
 * the queue's concurrency, and pauses that hold every request back (a 429's, a rate-limit window's with none remaining).
 */
export interface Throttle {
  /** Requests per second the controller now allows. */
  readonly rate: number;
  /** The server's limit as the rate controller learned it from 429s (requests a second), once it has. */
  readonly learnedLimit: number | undefined;
  /** Time spent paused for 429s and rate-limit windows with no requests remaining. */
  readonly pausedMs: number;
  /** What it knows of the server's limit, for a later run to start from (docs/scheduler.md#a-remembered-start). */
  readonly known: KnownLimit | undefined;
  /** Waits for the next slot of the pacer. */
  acquire(signal: AbortSignal): Promise<number>;
  /** When the pacer's next slot would be, were it taken now (clock time), without taking it. */
  nextSlot(): number;
  /** A success: speed up after sustained ones. */
  onSuccess(sentAt: number): void;
  /** A 429 sent at `sentAt`: slow down, and pause every request for `pauseMs` (none when 0) because of `cause`. */
  onRateLimited(sentAt: number, pauseMs: number, cause: string): void;
  /**
   * Proactive pacing from a response's rate-limit headers: slow down (or wait for the reset) before the server says
   * 429. Returns the run's stop when the headers ask for a wait that is a quota's.
   */
  heed(headers: ResponseHeaders | undefined, inFlight: number): StopInfo | undefined;
  /** Answers other processes got under the same shared pacer since the last call: the learner counts them too. */
  heard(outcomes: HeardOutcomes): void;
}

export interface ThrottleOptions {
  config: ResolvedSchedulerOptions;
  clock: Clock;
  queue: QueueControls;
  emit: (event: SchedulerEvent) => void;
  /** Aborted when the run stops: a pause's timer then lets go. */
  halt: AbortSignal;
  /** In a pool, the label of the key it paces: the pacer factory is given it. */
  key?: string | undefined;
  /** What an earlier run learned of the limit: the rate controller starts there (docs/scheduler.md#a-remembered-start). */
  start?: RateStart | undefined;
  /** With no start, begin low and double while no 429 comes (docs/scheduler.md#a-slow-start): a pool's keys do. */
  slowStart?: boolean;
}

/**
 * Why answers changed the rate from `before` to `after`: a raise after sustained success, or a rate lowered by answers
 * counted again once in (a failed raise's fall back from the requests sent, a slow start's failed doubling settled).
 */
function succeeded(before: number, after: number): AdaptReason {
  return after < before ? 'recounted' : 'sustained_success';
}

// Requests leave 1% under the allowed rate: arrival jitter on the network then cannot bunch two of them
// inside one interval of a leaky bucket set exactly at the plan's rate.
const PACING_MARGIN = 0.99;
/** Past a fixed window's end before the next is used: the server's clock and the way there are a little behind ours. */
const WINDOW_MARGIN_MS = 25;

export function createThrottle(options: ThrottleOptions): Throttle {
  return new AdaptiveThrottle(options);
}

class AdaptiveThrottle implements Throttle {
  readonly #config: ResolvedSchedulerOptions;
  readonly #clock: Clock;
  readonly #queue: QueueControls;
  readonly #emit: (event: SchedulerEvent) => void;
  readonly #halt: AbortSignal;
  #controller: RateController;
  /** A controller for this throttle, from a start (a leadership taken over: the run's rate as its shared row holds it). */
  readonly #controllerAt: (start: RateStart | undefined, slowStart: boolean) => RateController;
  /** Whether this throttle learned the rate at its last answer: with a shared pacer, leadership moves between workers. */
  #led: boolean | undefined;
  readonly #pacer: Pacer;
  #pausedUntil = Number.NEGATIVE_INFINITY;
  /** Pauses begun so far: the number of the latest, which alone restarts the queue when it ends. */
  #latestPause = 0;
  #pausedMs = 0;
  /** The latest success's latency. */
  #latencyMs = 0;
  // Whether the server's headers show a fixed window (used whole) or a bucket (spread evenly), and where the window ends.
  readonly #windows = windowTracker();

  constructor({ config, clock, queue, emit, halt, key, start, slowStart }: ThrottleOptions) {
    this.#config = config;
    this.#clock = clock;
    this.#queue = queue;
    this.#emit = emit;
    this.#halt = halt;
    const maxRate = requestsPerSecond(config.rate);
    // However many 429s come in a row, the rate never falls below a twentieth of the plan's (or 1/s without one):
    // past that, waiting is the pauses' job, and a storm that is not about our rate must not leave a crawl behind.
    const minRate = Number.isFinite(maxRate) ? maxRate / 20 : 1;
    // Sharing a pacer, the learner also hears other processes' answers, late: it learns the limit from 2 s of them at least
    // (the window being 3 s, 3 s never came: the span is measured from its first answer to now, so it stayed unlearned).
    // A start from an earlier run only where this one adapts: otherwise the configured rate is what it sends at.
    const from = config.adaptive ? start : undefined;
    this.#controllerAt = (begin, slow) => createRateController({ maxRate, maxConcurrency: config.concurrency, minRate, start: begin, slowStart: slow, ...(config.learns ? { learnAfterMs: 2000 } : {}) }, clock);
    this.#controller = this.#controllerAt(from, slowStart ?? false);
    this.#pacer = config.pacer ? config.pacer(paced(this.#controller.rate), clock, key) : createPacer(paced(this.#controller.rate), clock);
  }

  get rate(): number {
    return this.#controller.rate;
  }

  get learnedLimit(): number | undefined {
    return this.#controller.ceiling;
  }

  get pausedMs(): number {
    return this.#pausedMs;
  }

  get known(): KnownLimit | undefined {
    return this.#controller.known;
  }

  acquire(signal: AbortSignal): Promise<number> {
    return this.#pacer.acquire(signal);
  }

  nextSlot(): number {
    return this.#pacer.nextSlot?.() ?? this.#clock.now();
  }

  onSuccess(sentAt: number): void {
    this.#latencyMs = this.#clock.now() - sentAt;
    // Whether it learns first: a leadership taken over here replaces the controller (#takeOver).
    const learning = this.#learning();
    const controller = this.#controller;
    const before = controller.rate;
    if (learning && controller.onSuccess(sentAt, this.#latencyMs)) this.#applyRate(succeeded(before, controller.rate));
    // A cap from rate-limit headers may have expired since the pacer last heard.
    else if (this.#pacer.rate !== paced(controller.rate)) this.#pacer.setRate(paced(controller.rate));
  }

  onRateLimited(sentAt: number, pauseMs: number, cause: string): void {
    if (this.#learning() && this.#controller.onRateLimited(sentAt)) this.#applyRate('rate_limited');
    if (pauseMs > 0) this.#pauseFor(pauseMs, 'rate_limited', cause);
  }

  heed(headers: ResponseHeaders | undefined, inFlight: number): StopInfo | undefined {
    if (!headers || !this.#config.adaptive) return undefined;
    const hint = readRateLimitHeaders(headers, epochOf(this.#clock));
    if (!hint) return undefined;
    const now = this.#clock.now();
    // The server tells its limits: a slow start would only hold the run under them (the headers pace from here).
    if (this.#controller.told()) this.#applyRate('rate_limit_headers');
    const windowEnd = this.#learnLimiter(hint, now);
    // Requests still in flight will take from the same window's remaining requests.
    const left = hint.remaining - inFlight;
    if (left <= 0) return this.#waitForWindow(hint, windowEnd, now);
    this.#spreadRemaining(hint, left, windowEnd, now);
    return undefined;
  }

  heard({ accepted, rejected, rejectedSentAt, acceptedSentAt = [] }: HeardOutcomes): void {
    if (!this.#learning() || accepted + rejected === 0) return;
    // A 429 comes with when it was sent (the latest of them, on this clock), so that one sent before the last cut does
    // not cut again. Accepted ones come with when they were sent where the row kept it; the rest were sent about one
    // latency ago. Timed when heard, the others' answers before the run's first 429 were missing from the burst its
    // opening showed, and a failed raise fell back over the limit (docs/distributed-design.md#one-rate-shared).
    const sentAt = this.#clock.now() - this.#latencyMs;
    const limitedAt = rejectedSentAt ?? sentAt - this.#latencyMs;
    let cut = false;
    for (let i = 0; i < rejected; i++) cut = this.#controller.onRateLimited(limitedAt) || cut;
    let raised = false;
    const before = this.#controller.rate;
    const timed = acceptedSentAt.slice(-accepted).toSorted((a, b) => a - b);
    for (let i = 0; i < accepted; i++) raised = this.#controller.onSuccess(timed[i] ?? sentAt, this.#latencyMs) || raised;
    if (cut) this.#applyRate('rate_limited');
    else if (raised) this.#applyRate(succeeded(before, this.#controller.rate));
  }

  // Whether this throttle learns the rate: always alone; with a shared pacer, only while it is the run's leader.
  #learning(): boolean {
    const learning = this.#config.adaptive && (this.#config.learns?.() ?? true);
    if (learning && this.#led === false) this.#takeOver();
    this.#led = learning;
    return learning;
  }

  /**
   * Leadership came here from another worker: the run's rate is what the last leader left in the shared row (the
   * pacer's rate, read back at each slot), not this worker's own start, which learned nothing while it followed. Going on
   * from its own, a new leader wrote its configured rate back to the row at its first answer, over the limit the fleet
   * had learned. It goes on from the row's rate as from a trusted remembered one (docs/distributed-design.md).
   */
  #takeOver(): void {
    const rate = this.#pacer.rate / PACING_MARGIN;
    if (!Number.isFinite(rate) || this.#pacer.rate === paced(this.#controller.rate)) return;
    this.#controller = this.#controllerAt({ rate, trusted: true }, false);
    this.#queue.concurrency = this.#controller.concurrency;
    this.#emit({ type: 'adapt', rate: this.#controller.rate, concurrency: this.#controller.concurrency, reason: 'leader' });
  }

  #applyRate(reason: AdaptReason): void {
    const controller = this.#controller;
    this.#pacer.setRate(paced(controller.rate));
    this.#queue.concurrency = controller.concurrency;
    this.#emit({ type: 'adapt', rate: controller.rate, concurrency: controller.concurrency, reason });
  }

  #pauseFor(ms: number, reason: PauseReason, cause: string): void {
    const now = this.#clock.now();
    const until = now + ms;
    if (until <= this.#pausedUntil) return;
    this.#pausedMs += until - Math.max(now, this.#pausedUntil);
    this.#pausedUntil = until;
    const pause = ++this.#latestPause;
    this.#pacer.pauseUntil(until);
    this.#queue.pause();
    this.#emit({ type: 'pause', ms, reason, until: new Date(epochOf(this.#clock) + ms).toISOString(), cause });
    // Restart unless a later pause took over. Not by comparing clock readings: timers may fire a little before the
    // clock reaches their end, and a queue left paused would never start again. A run stopped meanwhile (a signal)
    // restarts it at once: the requests waiting in it must come out to be told of the stop, or the run never ends.
    const restart = () => {
      if (pause === this.#latestPause) this.#queue.start();
    };
    this.#clock.sleep(ms, this.#halt).then(restart, restart);
  }

  /**
   * What the headers show of the server's limiter: a fixed window lifts any cap (its whole count may be used at any
   * pace); otherwise a policy's rate caps ours. Returns the window's end, once a fixed window is known.
   */
  #learnLimiter(hint: RateLimitHint, now: number): number | undefined {
    const controller = this.#controller;
    const longest = this.#config.rateLimit.maxRetryAfterMs;
    if (this.#windows.observe(hint, now) === 'fixed_window' && controller.capUntil(Number.POSITIVE_INFINITY, now)) this.#applyRate('rate_limit_headers');
    // A fixed window's whole count may be used at any pace: nothing is capped or spread, and once what is left is in
    // flight the run waits for the window's end (the least bound the answers gave of it), not a reset rounded up.
    const windowEnd = this.#windows.windowEnd;
    if (windowEnd === undefined) {
      // A policy's rate is a cap only for a window the run would sleep through (see below: the same for windows).
      const policyRate = Math.min(...hint.policies.filter((policy) => policy.windowMs <= longest).map((policy) => policy.rate));
      if (policyRate < controller.rate) {
        if (controller.capUntil(policyRate, Number.POSITIVE_INFINITY)) this.#applyRate('rate_limit_headers');
      }
    }
    return windowEnd;
  }

  /** Nothing remains of the window once the requests in flight are counted: pause until it resets, or stop. */
  #waitForWindow(hint: RateLimitHint, windowEnd: number | undefined, now: number): StopInfo | undefined {
    const waitMs = windowEnd === undefined ? hint.resetMs : Math.max(0, windowEnd - now) + WINDOW_MARGIN_MS;
    const cause =
      windowEnd === undefined
        ? `rate-limit headers: no requests left, the window resets in ${describeWait(hint.resetMs)}`
        : `rate-limit headers: the window's ${hint.limit ?? 'count'} requests are used, it ends in ${describeWait(windowEnd - now)}`;
    const decision = decidePause(waitMs, this.#config.rateLimit.maxRetryAfterMs, cause, epochOf(this.#clock));
    if (decision.kind === 'quota') return { reason: 'quota', resumeAt: decision.resumeAt, message: decision.message };
    this.#pauseFor(decision.ms, 'rate_limit_headers', cause);
    return undefined;
  }

  /** `left` requests of the window remain: spread them evenly over the time to the reset. */
  #spreadRemaining(hint: RateLimitHint, left: number, windowEnd: number | undefined, now: number): void {
    // A window longer than a pause the run would sleep is a quota's: pacing to it would crawl for hours on the
    // server's word. It is left to the server: a window that runs out says so, and then the rule above stops the run.
    if (windowEnd !== undefined || hint.resetMs > this.#config.rateLimit.maxRetryAfterMs) return;
    const allowed = left / Math.max(hint.resetMs / 1000, 0.001);
    if (allowed < this.#controller.rate && this.#controller.capUntil(allowed, now + hint.resetMs)) this.#applyRate('rate_limit_headers');
  }
}

function paced(rate: number): number {
  return rate * PACING_MARGIN;
}
