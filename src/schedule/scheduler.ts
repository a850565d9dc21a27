import PQueue from 'p-queue';
import type { WebDataError } from '../errors/web-data-error.ts';
import { classify, mayHaveBeenCharged, type StopReason } from './classify.ts';
import { type Clock, epochOf, systemClock } from './clock.ts';
import { type Charge, createCreditMeter, type CreditMeter } from './credit-meter.ts';
import type { Sending, Task } from './attempt.ts';
import { type FairOptions, RoundRobinQueue } from './fair-queue.ts';
import { type ResolvedSchedulerOptions, resolveSchedulerOptions, type SchedulerOptions } from './options.ts';
import { nextStep, type Step } from './outcome-policy.ts';
import { type KeyLane, KeyPool, type Retirement } from './key-pool.ts';
import { allowanceStop, createStops, type Stops } from './stops.ts';
import type { Answered, HeardOutcomes, Outcome, Scheduler, SchedulerEvent, SchedulerStats, StopInfo, Work } from './types.ts';

export type { Answered, KeyStats, Outcome, Scheduler, SchedulerEvent, SchedulerStats, StopInfo, Work } from './types.ts';

/**
 * The one scheduler every request of a run goes through. p-queue provides concurrency (changeable at run time),
 * pausing and, with a round-robin queue class, fairness between series; the throttle (throttle.ts) spaces requests
 * evenly at a rate that adapts to the server; a credit meter reserves each request's weight before it is sent; the
 * outcome policy (outcome-policy.ts) says what a failure leads to, and `stops` (stops.ts) what may no longer be sent.
 * The requests are spread over the run's keys (key-pool.ts), each with a throttle of its own; one key is the default.
 */
export function createScheduler(options: SchedulerOptions = {}): Scheduler {
  return new RequestScheduler(resolveSchedulerOptions(options));
}

/**
 * The scheduler's state between requests: the parts it drives (queue, throttle, meter, stops), the requests not yet
 * settled, and the counters its stats and the outcome policy read. One request's way through it is `#attempt`.
 */
class RequestScheduler implements Scheduler {
  readonly #config: ResolvedSchedulerOptions;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #meter: CreditMeter;
  readonly #queue: PQueue<RoundRobinQueue, FairOptions>;
  readonly #listeners = new Set<(event: SchedulerEvent) => void>();
  readonly #stops: Stops;
  readonly #pool: KeyPool;
  /** Several keys: events say which key they are of, and a key's 401 or 403 retires it rather than stopping the run. */
  readonly #pooled: boolean;
  // Stopping wakes whatever waits (`stops.signal`); `cancel` also aborts requests in flight.
  readonly #cancel = new AbortController();
  readonly #idleWaiters: (() => void)[] = [];
  #budgetReached = false;
  /** Requests asked for and not yet resolved: waiting, in flight, or sleeping before a retry. */
  #unsettled = 0;
  #inFlight = 0;
  #consecutiveRateLimits = 0;
  #lastSuccessAt: number;
  readonly #counters = { total: 0, byStatus: {} as Record<string, number>, retries: 0, rateLimited: 0 };

  constructor(config: ResolvedSchedulerOptions) {
    this.#config = config;
    this.#clock = config.clock ?? systemClock;
    this.#random = config.random ?? Math.random;
    this.#meter =
      config.meter ??
      createCreditMeter({
        budget: config.budget,
        weights: config.credits.weights,
        defaultWeight: config.credits.defaultWeight,
        spentBefore: config.spentBefore,
      });
    this.#queue = new PQueue<RoundRobinQueue, FairOptions>({ concurrency: config.concurrency, queueClass: RoundRobinQueue });
    const emit = (event: SchedulerEvent) => this.#emit(event);
    // Waiting tasks must drain to their stopped outcome, even from a queue paused for a 429.
    this.#stops = createStops(emit, () => this.#queue.start());
    this.#pool = new KeyPool(config.keys, config, { clock: this.#clock, queue: this.#queue, emit, halt: this.#stops.signal, stops: this.#stops });
    this.#pooled = config.keys.length > 1;
    this.#lastSuccessAt = this.#clock.now();
  }

  request<T extends Answered>(work: Work, send: (signal: AbortSignal, key: string) => Promise<T>): Promise<Outcome<T>> {
    return new Promise<Outcome<T>>((resolve) => {
      const task: Task = {
        work: { series: work.series, path: work.path, weight: work.weight ?? this.#meter.weightOf(work.path) },
        page: work.page,
        send,
        resolve: resolve as (outcome: Outcome<Answered>) => void,
        attempts: 0,
        rateLimitedAttempts: 0,
      };
      this.#unsettled += 1;
      this.#enqueue(task);
    });
  }

  stop(reason: StopReason = 'interrupted', message = 'stopped on request: nothing new is sent; requests in flight settle'): void {
    this.#stops.stopRun({ reason, message });
  }

  abort(): void {
    this.#stops.stopRun({ reason: 'aborted', message: 'aborted: requests in flight were cancelled' });
    this.#cancel.abort();
  }

  get stopped(): StopInfo | undefined {
    return this.#stops.run;
  }

  affordable(path: string): boolean {
    const able = this.#meter.couldTake(this.#meter.weightOf(path));
    if (!able) this.#budgetReached = true;
    return able;
  }

  get budgetReached(): boolean {
    return this.#budgetReached;
  }

  get forbidden(): ReadonlyMap<string, unknown> {
    return this.#stops.forbidden;
  }

  onIdle(): Promise<void> {
    return this.#unsettled === 0 ? Promise.resolve() : new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
  }

  stats(): SchedulerStats {
    const counters = this.#counters;
    return {
      requests: { total: counters.total, byStatus: { ...counters.byStatus }, inFlight: this.#inFlight },
      retries: counters.retries,
      rateLimited: counters.rateLimited,
      ...this.#pool.figures(),
      concurrency: this.#queue.concurrency,
      credits: this.#meter.snapshot(),
    };
  }

  heard(outcomes: HeardOutcomes, key?: string): void {
    (this.#pool.lanes.find((lane) => lane.label === key) ?? (this.#pool.lanes[0] as KeyLane)).throttle.heard(outcomes);
  }

  on(listener: (event: SchedulerEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit(event: SchedulerEvent): void {
    for (const listener of this.#listeners) listener(event);
  }

  #enqueue(task: Task, front = false): void {
    void this.#queue.add(() => this.#attempt(task), { series: task.work.series, front });
  }

  /**
   * One attempt of a request: checks the stops and the budget, waits for the pacer and a reservation, sends, and hands
   * the answer or the failure on. Every wait of the request is here, in one function, and the steps between them are
   * synchronous: the order in which requests are sent and settled is the order of these awaits.
   */
  async #attempt(task: Task): Promise<void> {
    const { series, path, weight } = task.work;
    if (this.#endedByStop(task)) return;
    // No room left whatever happens to the requests in flight: refuse now rather than after waiting for the pacer.
    if (!this.#meter.couldTake(weight)) return this.#refuseForBudget(task);
    let lane: KeyLane;
    let period: string | undefined;
    try {
      const acquired = await this.#pool.acquire(path, weight, this.#stops.signal);
      // No key can serve it: their shares of the credits are spent, each was retired (and the run stopped), or their
      // allowances are spent until their next periods (the run stops: docs/credits.md#allowances).
      if ('none' in acquired) {
        if (acquired.none === 'allowance') this.#stops.stopRun(allowanceStop(acquired.out));
        return acquired.none === 'budget' ? this.#refuseForBudget(task) : this.#finishStopped(task);
      }
      ({ lane, period } = acquired);
    } catch (error) {
      return this.#finishUnsent(task, error);
    }
    // Every return before the request is sent gives the key back its slot in the queue, its share and its allowance.
    const unsent = () => this.#pool.settle(lane, weight, 0, period);
    if (this.#endedByStop(task)) return unsent();
    for (;;) {
      const reservation = this.#meter.reserve(weight);
      // The local meter answers at once: not awaited, so that its requests keep the order and timing they always had.
      let taken: boolean;
      if (typeof reservation === 'boolean') taken = reservation;
      else {
        try {
          taken = await reservation;
        } catch (error) {
          unsent();
          return this.#finishUnsent(task, error);
        }
        // A shared meter answers after a round trip, in which the run may have stopped: what it took goes back.
        const stoppedMeanwhile = this.#stoppedOutcome(task);
        if (stoppedMeanwhile) {
          if (taken) this.#meter.release({ weight, path, series });
          unsent();
          return this.#finish(task, stoppedMeanwhile);
        }
      }
      if (taken) break;
      // The budget cannot take this request: it is not sent, and its series stops.
      if (!this.#meter.couldTake(weight)) {
        unsent();
        return this.#refuseForBudget(task);
      }
      // Only reservations of requests in flight stand in the way: one of them may yet be returned (a definite
      // failure), so wait for one to settle rather than end the series (or, in a loop, every series left) early.
      try {
        await this.#meter.whenSettled(this.#stops.signal);
      } catch {
        unsent();
        return this.#finishStopped(task);
      }
      if (this.#endedByStop(task)) return unsent();
    }
    const sending = this.#startSending(task, lane, period);
    let answer: Answered;
    try {
      answer = await task.send(this.#cancel.signal, lane.label);
    } catch (error) {
      return this.#sendFailed(task, sending, error);
    }
    this.#answered(task, sending, answer);
  }

  /** Counts the attempt as sent and tells the listeners; holds a virtual clock while the request is in flight. */
  #startSending(task: Task, lane: KeyLane, period: string | undefined): Sending {
    const { series, path, weight } = task.work;
    const charge: Charge = { weight, path, series };
    task.attempts += 1;
    this.#counters.total += 1;
    this.#inFlight += 1;
    lane.sending += 1;
    lane.counts.requests += 1;
    this.#emit({ type: 'request', series, path, attempt: task.attempts, page: task.page, ...this.#keyOf(lane) });
    const sentAt = this.#clock.now();
    const release = this.#clock.hold?.();
    return { charge, lane, period, sentAt, release };
  }

  /** The key an answer is of, said when there are several, and the allowance's period its credits were held in. */
  #keyOf(lane: KeyLane, period?: string): { key?: string; period?: string } {
    return { ...(this.#pooled ? { key: lane.label } : {}), ...(period ? { period } : {}) };
  }

  /** A 2xx (or any answer the client resolved with): charged, counted, learned from. */
  #answered(task: Task, { charge, lane, period, sentAt, release }: Sending, answer: Answered): void {
    const { series, path, weight } = task.work;
    release?.();
    this.#inFlight -= 1;
    lane.sending -= 1;
    this.#meter.commit(charge);
    this.#pool.settle(lane, weight, weight, period);
    const status = answer.status ?? 200;
    this.#countStatus(status);
    this.#emit({ type: 'response', series, path, attempt: task.attempts, status, latencyMs: this.#clock.now() - sentAt, credits: weight, uncertain: false, page: task.page, ...this.#keyOf(lane, period) });
    this.#lastSuccessAt = this.#clock.now();
    this.#consecutiveRateLimits = 0;
    lane.throttle.onSuccess(sentAt);
    const quota = lane.throttle.heed(answer.headers, lane.sending);
    if (quota) this.#stops.stopRun(quota);
    this.#finish(task, { ok: true, value: answer, attempts: task.attempts });
  }

  /** The client rejected: the reservation is counted as spent when the request may have been charged, else returned. */
  #sendFailed(task: Task, sending: Sending, error: unknown): void {
    const { charge, lane, period } = sending;
    sending.release?.();
    this.#inFlight -= 1;
    lane.sending -= 1;
    const uncertain = mayHaveBeenCharged(error);
    if (uncertain) this.#meter.uncertain(charge);
    else this.#meter.release(charge);
    this.#pool.settle(lane, charge.weight, uncertain ? charge.weight : 0, period);
    this.#failed(task, error, sending, uncertain ? charge.weight : 0);
  }

  /** Carries out what the outcome policy says a failed attempt leads to. */
  #failed(task: Task, error: unknown, { sentAt, lane, period }: Sending, credits: number): void {
    const { series, path } = task.work;
    const status = (error as Partial<WebDataError>).status ?? (error as Partial<WebDataError>).kind ?? 'error';
    this.#countStatus(status);
    this.#emit({ type: 'response', series, path, attempt: task.attempts, status, latencyMs: this.#clock.now() - sentAt, credits, uncertain: credits > 0, ...this.#keyOf(lane, period) });
    const disposition = classify(error);
    if (disposition.action === 'rate_limited') {
      this.#counters.rateLimited += 1;
      lane.counts.rateLimited += 1;
      task.rateLimitedAttempts += 1;
    }
    const counts = {
      error,
      path,
      attempts: task.attempts,
      rateLimitedAttempts: task.rateLimitedAttempts,
      consecutiveRateLimits: this.#consecutiveRateLimits,
      stalled: this.#stalled(),
      nowEpochMs: epochOf(this.#clock),
    };
    this.#carryOut(task, nextStep(disposition, counts, this.#config, this.#random), error, sentAt, lane);
  }

  #carryOut(task: Task, step: Step, error: unknown, sentAt: number, lane: KeyLane): void {
    const { series, path } = task.work;
    switch (step.do) {
      case 'fail':
        return this.#finish(task, { ok: false, kind: 'failed', error, attempts: task.attempts });
      case 'retry':
        this.#emit({ type: 'retry', series, path, reason: 'transient', attempt: task.attempts, delayMs: step.delayMs });
        return this.#retryLater(task, step.delayMs);
      case 'back_off':
        this.#consecutiveRateLimits += 1;
        lane.throttle.onRateLimited(sentAt, step.pauseMs, step.cause);
        this.#emit({ type: 'retry', series, path, reason: 'rate_limited', attempt: task.attempts, delayMs: step.pauseMs });
        return this.#retryLater(task, 0);
      case 'stop_run':
        // A key refused (401) or out of credits (402): in a pool, that key is retired and the request goes to another.
        if ((step.stop.reason === 'unauthorized' || step.stop.reason === 'payment_required') && this.#retired(task, lane, step.stop.reason, step.stop.message)) return;
        this.#stops.stopRun(step.stop);
        return this.#finishStopped(task);
      case 'forbid':
        if (this.#retired(task, lane, 'forbidden', step.message)) return;
        this.#stops.forbid(path, error, step.message);
        return this.#finishStopped(task);
      case 'aborted':
        return this.#finish(task, { ok: false, kind: 'stopped', reason: 'aborted', error, attempts: task.attempts });
    }
  }

  /** In a pool, retires `lane` (a 401: for the run; a 402, a 403: for the endpoint) and sends the request on another
   * key; false when no other key serves the endpoint (the run or the endpoint stops, as with one key), or one key only. */
  #retired(task: Task, lane: KeyLane, reason: Retirement['reason'], message: string): boolean {
    if (!this.#pooled) return false;
    const path = reason === 'unauthorized' ? undefined : task.work.path;
    const others = this.#pool.retire(lane, { reason, message, at: this.#clock.now(), path });
    if (reason !== 'budget') this.#emit({ type: 'key_retired', key: lane.label, reason, message, path, at: new Date(epochOf(this.#clock)).toISOString() });
    if (!others) return false;
    this.#enqueue(task, true);
    return true;
  }

  #retryLater(task: Task, delayMs: number): void {
    this.#counters.retries += 1;
    if (delayMs <= 0) return this.#enqueue(task, true);
    this.#clock.sleep(delayMs, this.#stops.signal).then(
      () => this.#enqueue(task, true),
      () => this.#finishStopped(task),
    );
  }

  #countStatus(status: number | string): void {
    const key = String(status);
    this.#counters.byStatus[key] = (this.#counters.byStatus[key] ?? 0) + 1;
  }

  #stalled(): boolean {
    return this.#clock.now() - this.#lastSuccessAt > this.#config.rateLimit.stallAfterMs;
  }

  #finish(task: Task, outcome: Outcome<Answered>): void {
    task.resolve(outcome);
    this.#unsettled -= 1;
    if (this.#unsettled === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  #stoppedOutcome(task: Task): Outcome<never> | undefined {
    return this.#stops.outcome(task.work.path, task.attempts);
  }

  /** Ends the task with its stopped outcome when it may no longer be sent; says whether it did. */
  #endedByStop(task: Task): boolean {
    const stopped = this.#stoppedOutcome(task);
    if (stopped) this.#finish(task, stopped);
    return stopped !== undefined;
  }

  // For a task whose wait the stop woke, or that a stop or a 403 just ended: its stopped outcome is there.
  #finishStopped(task: Task): void {
    this.#finish(task, this.#stoppedOutcome(task) as Outcome<Answered>);
  }

  // Waiting for a slot or a reservation failed: woken by the run's stop, or (a limit shared in a database) the
  // database failed past its retries, and the request fails with that error, unsent.
  #finishUnsent(task: Task, error: unknown): void {
    const stopped = this.#stoppedOutcome(task);
    this.#finish(task, stopped ?? { ok: false, kind: 'failed', error, attempts: task.attempts });
  }

  #refuseForBudget(task: Task): void {
    this.#budgetReached = true;
    this.#finish(task, { ok: false, kind: 'stopped', reason: 'budget', attempts: task.attempts });
  }
}
