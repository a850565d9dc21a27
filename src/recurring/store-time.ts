import { type Clock, epochOf } from '../schedule/clock.ts';
import type { OccurrenceStore } from '../state/occurrence-store.ts';

/**
 * Clocks this close are taken to agree: NTP keeps machines milliseconds apart, and a round trip to the store is
 * milliseconds too. Below it a worker keeps its own clock, as it always did; above it, the store's.
 */
export const CLOCKS_AGREE_MS = 1_000;

/**
 * The time a worker's schedule keeps (docs/schedules.md#clocks): the state store's clock, which every worker of the
 * fleet shares and every claim is measured against, read through this worker's own. Each look reads the store's clock
 * (`sync`) and keeps how far this worker's is off; between looks, the worker's clock runs with that correction. A
 * worker whose clock is an hour ahead thus claims the occurrences due by the store's time, not those due in an hour
 * (which the store would refuse), and says once that its clock is off.
 */
export class StoreTime {
  readonly #clock: Clock;
  readonly #store: OccurrenceStore;
  readonly #say: (message: string) => void;
  /** The store's clock minus this worker's; 0 while they agree. */
  #offset = 0;
  /** The offset last said. */
  #told = 0;

  constructor(clock: Clock, store: OccurrenceStore, say: (message: string) => void) {
    this.#clock = clock;
    this.#store = store;
    this.#say = say;
  }

  /** Now, by the store's clock as last read (milliseconds since the epoch). */
  now(): number {
    return epochOf(this.#clock) + this.#offset;
  }

  /** Reads the store's clock, measured against this worker's at the middle of the round trip. */
  async sync(): Promise<void> {
    const before = epochOf(this.#clock);
    const storeTime = await this.#store.storeClock();
    this.heard(storeTime, (before + epochOf(this.#clock)) / 2);
  }

  /** The store's clock read `storeTime` when this worker's read `own` (a claim's answer says it too). */
  heard(storeTime: number, own = epochOf(this.#clock)): void {
    const measured = storeTime - own;
    const offset = Math.abs(measured) <= CLOCKS_AGREE_MS ? 0 : measured;
    this.#offset = offset;
    // Said when it starts or stops keeping the store's time, or the gap moves by more than the clocks' agreement.
    if ((offset === 0) === (this.#told === 0) && Math.abs(offset - this.#told) <= CLOCKS_AGREE_MS) return;
    this.#told = offset;
    if (offset === 0) return this.#say("this worker's clock agrees with its state store's again: it keeps its own time");
    const seconds = (Math.abs(offset) / 1000).toFixed(1);
    this.#say(
      `this worker's clock is ${seconds} s ${offset < 0 ? 'ahead of' : 'behind'} its state store's: its schedule keeps the store's time, ` +
        `which claims are measured against; set this machine's clock right (NTP)`,
    );
  }
}
