import { describeAllowance } from './allowance.ts';
import type { AllowancePer, Period } from './allowance-period.ts';
import { type Clock, epochOf } from './clock.ts';

/** A hold the ledger granted: credits of the key's allowance for the period the store's clock is in. */
export interface LedgerHold {
  /** Credits added to this process's hold (0: none left). */
  granted: number;
  /** The allowance as recorded when the store decided. */
  allowance: { credits: number; per: AllowancePer; timezone: string };
  period: Period;
  /** The store's clock when it decided (ms since the epoch). */
  storeTime: number;
}

/**
 * Where a key's allowance is kept (the state store, through the run): holds of its credits, decided there under a lock
 * for the period the store's clock is in. None: the key has no allowance recorded (any more).
 */
export interface AllowanceLedger {
  hold(want: number): Promise<LedgerHold | undefined>;
  /** Credits of a hold in `period` not spent, back to the store. */
  giveBack(period: string, credits: number): Promise<void>;
}

/** Why a key takes no request now: its allowance's period is spent (or this run's share of it), until `until`. */
export interface AllowanceOut {
  key: string;
  message: string;
  /** When its period ends and the key serves again (ms since the epoch, the store's clock); Infinity: not in this run. */
  until: number;
  timezone: string;
  /** The period that is spent (`2026-11-27`, `2026-11`). */
  period: string;
  /** When it left (ms since the epoch). */
  at: number;
}

/**
 * A request's answer from the meter: taken (for its period), wait for the key's next request in flight to settle (then
 * ask again), or out.
 */
export type AllowanceVerdict = { taken: true; period: string } | { taken: false; wait: Promise<void> } | { taken: false; out: AllowanceOut };

/** Requests' worth of credits held at a time (a chunk), so that a page's cost at the store is one round trip in many. */
export const CHUNK_REQUESTS = 8;
/** A large allowance is held in chunks of this part of it at least, so that a month of pages asks the store seldom. */
export const CHUNK_PART = 64;

/**
 * One key's allowance as this process spends it (docs/credits.md#holds): credits held from the ledger a chunk at a
 * time, taken by requests locally, and held again when spent — near the end, only what is left, so that processes
 * racing for the last credits never pass the allowance between them. A request whose credits the allowance cannot hold
 * waits while requests of the key are in flight (one may fail and give its credits back); then the key is out until
 * its period ends. The period is the store's: what the store's clock said at the last hold, carried on by this
 * process's clock, so that a hold left from a period that ended is given back rather than spent in the next.
 *
 * `cap`: the most credits this run may take of the allowance (a share: `allowance.spread`), on top of the period's.
 */
export class AllowanceMeter {
  readonly #label: string;
  readonly #ledger: AllowanceLedger;
  readonly #clock: Clock;
  readonly #cap: number | undefined;
  #hold: { period: Period; available: number; allowance: LedgerHold['allowance'] } | undefined;
  /** The ledger said the key has no allowance: its requests go as if it had none. */
  #none = false;
  /** Credits of requests taken and not settled. */
  #inFlight = 0;
  /** Credits this run's requests were charged (or possibly charged). */
  #charged = 0;
  /** The store's clock less this process's, as the last hold measured it. */
  #offset = 0;
  #out: AllowanceOut | undefined;
  #asking: Promise<void> | undefined;
  /** Those waiting for a request in flight to settle. */
  readonly #settled = new Set<() => void>();

  constructor(options: { label: string; ledger: AllowanceLedger; clock: Clock; cap?: number | undefined }) {
    this.#label = options.label;
    this.#ledger = options.ledger;
    this.#clock = options.clock;
    this.#cap = options.cap;
  }

  /** Why the key is out now, while it is (its period not over yet by the store's clock as carried on here). */
  get out(): AllowanceOut | undefined {
    if (this.#out && this.#storeNow() >= this.#out.until) this.#out = undefined;
    return this.#out;
  }

  /** Credits for a request of `weight`: taken at once from what is held, or after a hold from the ledger. */
  take(weight: number): AllowanceVerdict | Promise<AllowanceVerdict> {
    if (this.#none) return this.#taken(weight, '');
    const out = this.out;
    if (out) return { taken: false, out };
    if (this.#cap !== undefined && this.#charged + this.#inFlight + weight > this.#cap) {
      return this.#inFlight > 0 ? this.#wait() : this.#cannot(this.#hold?.period, `its share for this run (${this.#cap} credits) is spent`, true);
    }
    const hold = this.#hold;
    // The period ended by the store's clock: what is left of its hold goes back, and the next is the new period's.
    if (hold && this.#storeNow() >= hold.period.end) {
      this.#hold = undefined;
      void this.#ledger.giveBack(hold.period.key, hold.available).catch(() => undefined);
    }
    if (this.#hold && this.#hold.available >= weight) {
      this.#hold.available -= weight;
      return this.#taken(weight, this.#hold.period.key);
    }
    return this.#holdMore(weight);
  }

  /** A request taken in `period` settled: `charged`, its credits are spent (the ledger takes them over); else held again. */
  settle(period: string, weight: number, charged: boolean): void {
    this.#inFlight -= weight;
    if (charged) this.#charged += weight;
    else if (this.#hold && this.#hold.period.key === period) this.#hold.available += weight;
    for (const wake of [...this.#settled]) wake();
    this.#settled.clear();
  }

  /** What is held and not spent goes back (the run ends). */
  async close(): Promise<void> {
    const hold = this.#hold;
    this.#hold = undefined;
    if (hold && hold.available > 0) await this.#ledger.giveBack(hold.period.key, hold.available);
  }

  /** Made as the verdict is, so that a request settling before the caller waits still wakes it. */
  #wait(): AllowanceVerdict {
    return { taken: false, wait: new Promise<void>((resolve) => this.#settled.add(resolve)) };
  }

  #taken(weight: number, period: string): AllowanceVerdict {
    this.#inFlight += weight;
    return { taken: true, period };
  }

  /** One hold at a time: a request that finds one on its way waits for it, then looks again. */
  async #holdMore(weight: number): Promise<AllowanceVerdict> {
    while (this.#asking) await this.#asking;
    if (this.#none || this.out || (this.#hold && this.#hold.available >= weight && this.#storeNow() < this.#hold.period.end)) return this.take(weight);
    const asking = this.#ask(weight);
    this.#asking = asking.then(
      () => undefined,
      () => undefined,
    );
    try {
      await asking;
    } finally {
      this.#asking = undefined;
    }
    if (this.#none) return this.#taken(weight, '');
    const hold = this.#hold;
    if (hold && hold.available >= weight) {
      hold.available -= weight;
      return this.#taken(weight, hold.period.key);
    }
    // Requests of the key in flight may yet fail and give their credits back.
    if (this.#inFlight > 0) return this.#wait();
    return this.#cannot(hold?.period, 'is spent');
  }

  /** A chunk from the ledger: a few requests' worth, or a part of a large allowance; near the end what is left. */
  async #ask(weight: number): Promise<void> {
    const available = this.#hold?.available ?? 0;
    const chunk = Math.max(weight * CHUNK_REQUESTS, Math.ceil((this.#hold?.allowance.credits ?? 0) / CHUNK_PART));
    // No more than the run's share lets it spend (take checked that one request fits): what it cannot spend, it does
    // not keep from the others who share the key.
    const room = this.#cap === undefined ? Number.POSITIVE_INFINITY : this.#cap - this.#charged - this.#inFlight;
    const asked = epochOf(this.#clock);
    const held = await this.#ledger.hold(Math.min(Math.max(weight, chunk), Math.max(weight, room)) - available);
    if (held === undefined) {
      this.#none = true;
      return;
    }
    this.#offset = held.storeTime - (asked + epochOf(this.#clock)) / 2;
    const same = this.#hold?.period.key === held.period.key;
    // A hold of another period (the store's clock crossed a boundary before this process's did): the one before is
    // left to the run's end, when every hold of the run goes.
    this.#hold = { period: held.period, allowance: held.allowance, available: (same ? available : 0) + held.granted };
  }

  /**
   * The key is out until its period ends (`forRun`: for the rest of the run, its share spent): why, and when it opens
   * again, in words and as the store's instant.
   */
  #cannot(period: Period | undefined, what: string, forRun = false): AllowanceVerdict {
    const allowance = this.#hold?.allowance;
    const until = forRun || !period ? Number.POSITIVE_INFINITY : period.end;
    const zone = allowance?.timezone ?? 'UTC';
    const of = allowance ? `its allowance of ${describeAllowance(allowance)}` : 'its allowance';
    const when = Number.isFinite(until) ? `; it opens again at ${new Date(until).toISOString()} (${allowance?.per === 'month' ? 'the first of the month' : 'midnight'}, ${zone})` : '';
    const message = `key "${this.#label}": ${forRun ? what : `${of} ${what} for ${period?.key}`}${when}`;
    this.#out = { key: this.#label, message, until, timezone: zone, period: period?.key ?? '', at: epochOf(this.#clock) };
    return { taken: false, out: this.#out };
  }

  #storeNow(): number {
    return epochOf(this.#clock) + this.#offset;
  }
}
