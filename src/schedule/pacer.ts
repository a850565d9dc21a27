import type { Clock } from './clock.ts';

export interface Pacer {
  /** Requests per second now allowed (`Infinity`: no pacing). */
  readonly rate: number;
  setRate(requestsPerSecond: number): void;
  /** No slot starts before `at` (clock time). */
  pauseUntil(at: number): void;
  readonly pausedUntil: number;
  /** Waits for the next free slot and takes it; resolves to its time. */
  acquire(signal?: AbortSignal): Promise<number>;
  /**
   * When the next free slot would be, were it taken now (clock time), without taking it: how a pool of keys sends a
   * request to the key free soonest. A pacer shared beyond this process may not know it; then now.
   */
  nextSlot?(): number;
}

/**
 * Spaces requests evenly at a rate that can change at run time. A fixed window that releases a whole second's
 * quota at once earns mostly 429s from a leaky-bucket server; even spacing earns none. Each caller reserves a slot
 * `1/rate` after the previous one; a rate change or a pause invalidates reservations not yet reached, and their
 * holders reserve again under the new terms.
 */
export function createPacer(requestsPerSecond: number, clock: Clock): Pacer {
  let rate = requestsPerSecond;
  let interval = intervalOf(rate);
  let lastGranted = Number.NEGATIVE_INFINITY;
  /** When the last slot was actually granted (its holder woken), which a late wake may find a moment ago. */
  let lastWoken = Number.NEGATIVE_INFINITY;
  let nextFree = Number.NEGATIVE_INFINITY;
  let pausedUntil = Number.NEGATIVE_INFINITY;
  let generation = 0;

  const invalidate = () => {
    generation += 1;
    nextFree = lastGranted + interval;
  };

  return {
    get rate() {
      return rate;
    },
    get pausedUntil() {
      return pausedUntil;
    },
    setRate(next) {
      if (next === rate) return;
      rate = next;
      interval = intervalOf(next);
      invalidate();
    },
    pauseUntil(at) {
      if (at <= pausedUntil) return;
      pausedUntil = at;
      invalidate();
    },
    nextSlot() {
      return Math.max(clock.now(), nextFree, pausedUntil);
    },
    async acquire(signal) {
      for (;;) {
        signal?.throwIfAborted();
        const now = clock.now();
        const slot = Math.max(now, nextFree, pausedUntil);
        nextFree = slot + interval;
        const reservedIn = generation;
        if (slot > now) await clock.sleep(slot - now, signal);
        // Woken late (the process was busy: a timer fires when the thread is free), together with the slots before:
        // sent as they were, they would reach the server at once, a burst its bucket may refuse. Seen: a key at 0.99
        // of its limit sent 4 requests within 15 ms after the run's thread stalled 0.7 s, the fourth a 429. A slot
        // woken within an interval of the last one woken waits for that interval, less a timer's lateness (the time the
        // stall took is lost, not made up); the slots after it keep their times, so that a timer late once costs
        // nothing when it passes (a slot late 30 ms at 10 r/s: the next three 20, 10 and 0 ms late).
        while (reservedIn === generation) {
          const woken = clock.now();
          const spaced = lastWoken + interval - Math.min(LATE_MS, interval / 4);
          if (woken >= spaced) {
            lastGranted = Math.max(lastGranted, slot);
            lastWoken = woken;
            return slot;
          }
          await clock.sleep(spaced - woken, signal);
        }
      }
    },
  };
}

/** Timers fire a little late on a busy machine: two wakes this much (a quarter interval at most) closer than an interval are still apart. */
const LATE_MS = 10;

function intervalOf(requestsPerSecond: number): number {
  return Number.isFinite(requestsPerSecond) && requestsPerSecond > 0 ? 1000 / requestsPerSecond : 0;
}
