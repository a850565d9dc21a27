import PQueue from 'p-queue';
import type { WebDataError } from '../errors/web-data-error.ts';
import { classify, mayHaveBeenCharged } from './classify.ts';
import { type Clock, epochOf, systemClock } from './clock.ts';
import { type Charge, createCreditMeter } from './credit-meter.ts';
import { type FairOptions, RoundRobinQueue } from './fair-queue.ts';
import { resolveSchedulerOptions, type SchedulerOptions } from './options.ts';
import { nextStep } from './outcome-policy.ts';
import { createStops } from './stops.ts';
import { createThrottle } from './throttle.ts';
import type { Answered, Outcome, Scheduler, SchedulerEvent, Work } from './types.ts';

export type { Answered, Outcome, Scheduler, SchedulerEvent, SchedulerStats, StopInfo, Work } from './types.ts';

interface Task {
  work: Required<Work>;
  send: (signal: AbortSignal) => Promise<Answered>;
  resolve: (outcome: Outcome<Answered>) => void;
  attempts: number;
  rateLimitedAttempts: number;
}

/**
 * The one scheduler every request of a run goes through. p-queue provides concurrency (changeable at run time),
 * pausing and, with a round-robin queue class, fairness between series; the throttle (throttle.ts) spaces requests
 * evenly at a rate that adapts to the server; a credit meter reserves each request's weight before it is sent; the
 * outcome policy (outcome-policy.ts) says what a failure leads to, and `stops` (stops.ts) what may no longer be sent.
 */
export function createScheduler(options: SchedulerOptions = {}): Scheduler {
  const config = resolveSchedulerOptions(options);
  const clock: Clock = config.clock ?? systemClock;
  const random = config.random ?? Math.random;
  const meter =
    config.meter ??
    createCreditMeter({
      budget: config.budget,
      weights: config.credits.weights,
      defaultWeight: config.credits.defaultWeight,
      spentBefore: config.spentBefore,
    });
  const queue = new PQueue<RoundRobinQueue, FairOptions>({ concurrency: config.concurrency, queueClass: RoundRobinQueue });
  const listeners = new Set<(event: SchedulerEvent) => void>();
  const emit = (event: SchedulerEvent) => {
    for (const listener of listeners) listener(event);
  };
  // Waiting tasks must drain to their stopped outcome, even from a queue paused for a 429.
  const stops = createStops(emit, () => queue.start());
  const throttle = createThrottle({ config, clock, gate: queue, emit, halt: stops.signal });
  // Stopping wakes whatever waits (`stops.signal`); `cancel` also aborts requests in flight.
  const cancel = new AbortController();

  const idleWaiters: (() => void)[] = [];
  let budgetReached = false;
  let open = 0;
  let inFlight = 0;
  let consecutiveRateLimits = 0;
  let lastSuccessAt = clock.now();
  const counters = { total: 0, byStatus: {} as Record<string, number>, retries: 0, rateLimited: 0 };

  const finish = (task: Task, outcome: Outcome<Answered>) => {
    task.resolve(outcome);
    open -= 1;
    if (open === 0) for (const wake of idleWaiters.splice(0)) wake();
  };

  const stoppedOutcome = (task: Task) => stops.outcome(task.work.path, task.attempts);
  // For a task whose wait the stop woke, or that a stop or a 403 just ended: its stopped outcome is there.
  const finishStopped = (task: Task) => finish(task, stoppedOutcome(task) as Outcome<Answered>);

  const enqueue = (task: Task, front = false) => {
    void queue.add(() => attempt(task), { series: task.work.series, front });
  };

  const count = (status: number | string) => {
    const key = String(status);
    counters.byStatus[key] = (counters.byStatus[key] ?? 0) + 1;
  };

  const stalled = () => clock.now() - lastSuccessAt > config.rateLimit.stallAfterMs;

  const retryLater = (task: Task, delayMs: number) => {
    counters.retries += 1;
    if (delayMs <= 0) return enqueue(task, true);
    clock.sleep(delayMs, stops.signal).then(
      () => enqueue(task, true),
      () => finishStopped(task),
    );
  };

  // Waiting for a slot or a reservation failed: woken by the run's stop, or (a limit shared in a database) the
  // database failed past its retries, and the request fails with that error, unsent.
  const finishUnsent = (task: Task, error: unknown) => {
    const stopped = stoppedOutcome(task);
    finish(task, stopped ?? { ok: false, kind: 'failed', error, attempts: task.attempts });
  };

  const refuseForBudget = (task: Task) => {
    budgetReached = true;
    finish(task, { ok: false, kind: 'stopped', reason: 'budget', attempts: task.attempts });
  };

  async function attempt(task: Task): Promise<void> {
    const { series, path, weight } = task.work;
    const gated = stoppedOutcome(task);
    if (gated) return finish(task, gated);
    // No room left whatever happens to the requests in flight: refuse now rather than after waiting for the pacer.
    if (!meter.couldTake(weight)) return refuseForBudget(task);
    try {
      await throttle.acquire(stops.signal);
    } catch (error) {
      return finishUnsent(task, error);
    }
    const late = stoppedOutcome(task);
    if (late) return finish(task, late);
    for (;;) {
      const answer = meter.reserve(weight);
      // The local meter answers at once: not awaited, so that its requests keep the order and timing they always had.
      let taken: boolean;
      if (typeof answer === 'boolean') taken = answer;
      else {
        try {
          taken = await answer;
        } catch (error) {
          return finishUnsent(task, error);
        }
        // A shared meter answers after a round trip, in which the run may have stopped: what it took goes back.
        const meanwhile = stoppedOutcome(task);
        if (meanwhile) {
          if (taken) meter.release({ weight, path, series });
          return finish(task, meanwhile);
        }
      }
      if (taken) break;
      // The budget cannot take this request: it is not sent, and its series stops.
      if (!meter.couldTake(weight)) return refuseForBudget(task);
      // Only reservations of requests in flight stand in the way: one of them may yet be returned (a definite
      // failure), so wait for one to settle rather than end the series (or, in a loop, every series left) early.
      try {
        await meter.whenSettled(stops.signal);
      } catch {
        return finishStopped(task);
      }
      const later = stoppedOutcome(task);
      if (later) return finish(task, later);
    }
    const charge: Charge = { weight, path, series };
    task.attempts += 1;
    counters.total += 1;
    inFlight += 1;
    emit({ type: 'request', series, path, attempt: task.attempts });
    const sentAt = clock.now();
    const release = clock.hold?.();
    let answer: Answered;
    try {
      answer = await task.send(cancel.signal);
    } catch (error) {
      release?.();
      inFlight -= 1;
      const uncertain = mayHaveBeenCharged(error);
      if (uncertain) meter.uncertain(charge);
      else meter.release(charge);
      return failed(task, error, sentAt, uncertain ? weight : 0);
    }
    release?.();
    inFlight -= 1;
    meter.commit(charge);
    const status = answer.status ?? 200;
    count(status);
    emit({ type: 'response', series, path, attempt: task.attempts, status, latencyMs: clock.now() - sentAt, credits: weight, uncertain: false });
    lastSuccessAt = clock.now();
    consecutiveRateLimits = 0;
    throttle.onSuccess(sentAt);
    const quota = throttle.heed(answer.headers, inFlight);
    if (quota) stops.stopRun(quota);
    return finish(task, { ok: true, value: answer, attempts: task.attempts });
  }

  /** Carries out what the outcome policy says a failed attempt leads to. */
  function failed(task: Task, error: unknown, sentAt: number, credits: number): void {
    const { series, path } = task.work;
    const status = (error as Partial<WebDataError>).status ?? (error as Partial<WebDataError>).kind ?? 'error';
    count(status);
    emit({ type: 'response', series, path, attempt: task.attempts, status, latencyMs: clock.now() - sentAt, credits, uncertain: credits > 0 });
    const disposition = classify(error);
    if (disposition.action === 'rate_limited') {
      counters.rateLimited += 1;
      task.rateLimitedAttempts += 1;
    }
    const counts = { error, path, attempts: task.attempts, rateLimitedAttempts: task.rateLimitedAttempts, consecutiveRateLimits, stalled: stalled(), nowEpochMs: epochOf(clock) };
    const step = nextStep(disposition, counts, config, random);
    switch (step.do) {
      case 'fail':
        return finish(task, { ok: false, kind: 'failed', error, attempts: task.attempts });
      case 'retry':
        emit({ type: 'retry', series, path, reason: 'transient', attempt: task.attempts, delayMs: step.delayMs });
        return retryLater(task, step.delayMs);
      case 'back_off':
        consecutiveRateLimits += 1;
        throttle.onRateLimited(sentAt, step.pauseMs, step.cause);
        emit({ type: 'retry', series, path, reason: 'rate_limited', attempt: task.attempts, delayMs: step.pauseMs });
        return retryLater(task, 0);
      case 'stop_run':
        stops.stopRun(step.stop);
        return finishStopped(task);
      case 'forbid':
        stops.forbid(path, error, step.message);
        return finishStopped(task);
      case 'aborted':
        return finish(task, { ok: false, kind: 'stopped', reason: 'aborted', error, attempts: task.attempts });
    }
  }

  return {
    request<T extends Answered>(work: Work, send: (signal: AbortSignal) => Promise<T>): Promise<Outcome<T>> {
      return new Promise<Outcome<T>>((resolve) => {
        const task: Task = {
          work: { series: work.series, path: work.path, weight: work.weight ?? meter.weightOf(work.path) },
          send,
          resolve: resolve as (outcome: Outcome<Answered>) => void,
          attempts: 0,
          rateLimitedAttempts: 0,
        };
        open += 1;
        enqueue(task);
      });
    },
    stop(reason = 'interrupted', message = 'stopped on request: nothing new is sent; requests in flight settle') {
      stops.stopRun({ reason, message });
    },
    abort() {
      stops.stopRun({ reason: 'aborted', message: 'aborted: requests in flight were cancelled' });
      cancel.abort();
    },
    get stopped() {
      return stops.run;
    },
    affordable(path) {
      const able = meter.couldTake(meter.weightOf(path));
      if (!able) budgetReached = true;
      return able;
    },
    get budgetReached() {
      return budgetReached;
    },
    forbidden: stops.forbidden,
    onIdle() {
      return open === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve));
    },
    stats() {
      return {
        requests: { total: counters.total, byStatus: { ...counters.byStatus }, inFlight },
        retries: counters.retries,
        rateLimited: counters.rateLimited,
        rateLimitedWaitMs: throttle.pausedMs,
        rate: throttle.rate,
        concurrency: queue.concurrency,
        credits: meter.snapshot(),
      };
    },
    heard: (outcomes) => throttle.heard(outcomes),
    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
