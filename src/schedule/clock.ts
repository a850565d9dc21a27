import { setTimeout as delay } from 'node:timers/promises';

/**
 * Where the scheduler gets its time. Injectable so that tests can run pacing, backoff and rate limits in
 * virtual time, deterministically, without waiting.
 */
export interface Clock {
  /** Milliseconds since an arbitrary origin; never goes backwards. */
  now(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /**
   * Virtual clocks only: keeps time from passing until the returned release is called. The scheduler holds the
   * clock while a request is in flight, so that in virtual time the network is instant and a server sharing the
   * clock sees requests at the times they were sent.
   */
  hold?(): () => void;
  /**
   * Wall-clock time, milliseconds since the Unix epoch: for what people read and servers send (a pause's end, when to
   * resume, an `X-RateLimit-Reset` in Unix seconds). Without it, `epochOf` reads the system's.
   */
  epoch?(): number;
}

/** The clock's wall-clock time: the one place the scheduler reads the system's time when a clock has none. */
export function epochOf(clock: Clock): number {
  return clock.epoch ? clock.epoch() : Date.now();
}

/** The longest timer Node arms as asked: a longer one fires after 1 ms (with a TimeoutOverflowWarning). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Sleeps `ms` in steps no longer than MAX_TIMER_MS, so that no timer is ever armed past it. `wait` is one step's
 * sleep (injectable: a test counts the steps of a month's sleep without waiting for it).
 */
export async function sleepInSteps(
  ms: number,
  signal: AbortSignal | undefined,
  wait: (ms: number, signal: AbortSignal | undefined) => Promise<void> = (step, s) => delay(step, undefined, { signal: s }),
): Promise<void> {
  signal?.throwIfAborted();
  for (let left = ms; left > 0; left -= MAX_TIMER_MS) await wait(Math.min(left, MAX_TIMER_MS), signal);
}

export const systemClock: Clock = {
  now: () => performance.now(),
  epoch: () => Date.now(),
  sleep: (ms, signal) => sleepInSteps(ms, signal),
};

export interface VirtualClock extends Clock {
  /** Timers waiting, earliest first. */
  readonly pending: number;
}

/**
 * A clock in which time passes only through sleeps: each pending timer fires in order of its due time, one per
 * turn of the event loop (so that I/O in between still runs), and `now()` jumps to it. Real I/O takes no
 * virtual time, and none passes while the clock is held (see `Clock.hold`). Share one with the simulator (`startSimulator({ clock: clock.now })`) to test rate limits in
 * virtual seconds that pass in real milliseconds. Given `epochAt`, its wall-clock time (`epoch()`) is `epochAt` plus the
 * virtual time passed (share it with the simulator's `epoch`); without, wall-clock time is the system's, as the
 * client's (which reads HTTP dates in `Retry-After` by the system's time).
 */
export function virtualClock(start = 0, epochAt?: number): VirtualClock {
  let now = start;
  let sequence = 0;
  const timers: { at: number; seq: number; fire: () => void }[] = [];
  let scheduled = false;
  let holds = 0;

  const drain = () => {
    scheduled = false;
    if (holds > 0) return;
    timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
    const next = timers.shift();
    if (!next) return;
    now = Math.max(now, next.at);
    next.fire();
    if (timers.length > 0) schedule();
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(drain);
  };

  return {
    now: () => now,
    ...(epochAt === undefined ? {} : { epoch: () => epochAt + (now - start) }),
    get pending() {
      return timers.length;
    },
    hold() {
      holds += 1;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        holds -= 1;
        if (holds === 0 && timers.length > 0) schedule();
      };
    },
    sleep(ms, signal) {
      signal?.throwIfAborted();
      return new Promise<void>((resolve, reject) => {
        const timer = {
          at: now + Math.max(0, ms),
          seq: sequence++,
          fire: () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
        };
        const onAbort = () => {
          const index = timers.indexOf(timer);
          if (index !== -1) timers.splice(index, 1);
          reject(signal?.reason);
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        timers.push(timer);
        schedule();
      });
    },
  };
}
