import { matches, type RequestFacts } from './faults.ts';
import type { FaultRule } from './options.ts';
import type { Gate } from './types.ts';

type Match = NonNullable<FaultRule['match']>;

/** Requests held by `Simulator.park`: every gate not yet released, each with the requests it matches. */
export class ParkingLot {
  readonly #gates = new Set<ParkedRequests>();

  /** A gate that holds every later request matching `match` until it is released. */
  park(match: Match): Gate {
    const gate = new ParkedRequests(match, () => this.#gates.delete(gate));
    this.#gates.add(gate);
    return gate;
  }

  /**
   * The gates a request meets, each to be passed in turn (`hold`). Read as it goes: a gate released meanwhile is
   * skipped, and with none, a request goes on without waiting at all.
   */
  *matching(facts: RequestFacts): Generator<ParkedRequests> {
    for (const gate of this.#gates) if (matches(gate.match, facts)) yield gate;
  }

  /** Lets every held request go on (the simulator is closing). */
  releaseAll(): void {
    for (const gate of this.#gates) gate.release();
  }
}

/** One gate of `Simulator.park`: the requests it holds, how many have arrived, and who waits for how many. */
export class ParkedRequests implements Gate {
  readonly match: Match;
  readonly #done: () => void;
  #released = false;
  #waiting = 0;
  #arrived = 0;
  readonly #held: (() => void)[] = [];
  readonly #watchers: { count: number; wake: () => void }[] = [];

  constructor(match: Match, done: () => void) {
    this.match = match;
    this.#done = done;
  }

  get waiting(): number {
    return this.#waiting;
  }

  get arrived(): number {
    return this.#arrived;
  }

  reached(count = 1): Promise<void> {
    return this.#arrived >= count ? Promise.resolve() : new Promise<void>((wake) => this.#watchers.push({ count, wake }));
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#done();
    for (const go of this.#held.splice(0)) go();
  }

  /** Holds a request until the gate is released (not at all once it is). */
  hold(): Promise<void> {
    if (this.#released) return Promise.resolve();
    this.#arrived += 1;
    this.#waiting += 1;
    this.#notify();
    return new Promise<void>((resolve) =>
      this.#held.push(() => {
        this.#waiting -= 1;
        resolve();
      }),
    );
  }

  #notify(): void {
    for (const watcher of this.#watchers.filter((waiter) => this.#arrived >= waiter.count)) {
      this.#watchers.splice(this.#watchers.indexOf(watcher), 1);
      watcher.wake();
    }
  }
}
