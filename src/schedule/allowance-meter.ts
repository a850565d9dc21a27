import { describeAllowance } from './allowance.ts';
import type { AllowancePer, Period } from './allowance-period.ts';
import { type Clock, epochOf } from './clock.ts';

/** A hold the ledger granted: credits of the key's allowance for the period the store's clock is in. */
export interface LedgerHold {
  /** Credits added to this process's hold (0: none left). */
  granted: number;
  /** What this process's hold in the period is now, the grant included (the store's word: see `AllowanceMeter`). */
  mine: number;
  /** The allowance as recorded when the store decided. */
  allowance: { credits: number; per: AllowancePer; timezone: string };
  period: Period;
  /** Credits the ledger held for the key in the period when the store decided (every pipeline's). */
  spent: number;
  /** The store's clock when it decided (ms since the epoch). */
  storeTime: number;
}

/** A key's allowance as this process last heard of it, for the metrics (docs/observability.md). */
export interface AllowanceFigures {
  credits: number;
  per: AllowancePer;
  period: string;
  /** Credits not yet spent in the period: the ledger's word at the last hold, less what this process was charged since. */
  left: number;
  /** When the period ends (ms since the epoch, the store's clock). */
  endsAt: number;
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

/** What this process holds of the key's allowance in a period, not yet taken by a request. */
interface Held {
  period: Period;
  available: number;
  allowance: LedgerHold['allowance'];
}

/** Requests' worth of credits held at a time (a chunk), so that a page's cost at the store is one round trip in many. */
export const CHUNK_REQUESTS = 8;
/** A large allowance is held in chunks of this part of it at least, so that a month of pages asks the store seldom. */
export const CHUNK_PART = 64;
/** A hold not heard of from the store for this long is asked again before it is spent (half the time a hold stands). */
export const STALE_AFTER_MS = 30_000;

/**
 * One key's allowance as this process spends it (docs/credits.md#holds): credits held from the ledger a chunk at a
 * time, taken by requests locally, and held again when spent — near the end, only what is left, so that processes
 * racing for the last credits never pass the allowance between them. A request whose credits the allowance cannot hold
 * waits while requests of the key are in flight (one may fail and give its credits back); then the key is out until
 * its period ends. The period is the store's: what the store's clock said at the last hold, carried on by this
 * process's clock, so that a hold left from a period that ended is given back rather than spent in the next.
 *
 * A hold stands at the store only while this process renews it: one not heard of from the store for `staleAfterMs`
 * (a process suspended, a store that did not answer) is asked again before its credits are spent, and what the store
 * says this process holds is the most it may spend (so that a hold that expired meanwhile is not spent twice).
 *
 * `cap`: the most credits this run may take of the allowance (a share: `allowance.spread`), on top of the period's.
 */
export class AllowanceMeter {
  readonly #label: string;
  readonly #ledger: AllowanceLedger;
  readonly #clock: Clock;
  readonly #cap: number | undefined;
  readonly #staleAfterMs: number;
  /** When the store last answered a hold (this process's clock, ms since the epoch). */
  #heardAt = 0;
  #hold: Held | undefined;
  /** The ledger said the key has no allowance: its requests go as if it had none. */
  #none = false;
  /** Credits of requests taken and not settled. */
  #inFlight = 0;
  /** Credits this run's requests were charged (or possibly charged). */
  #charged = 0;
  /** The ledger's spend in the period at the last hold, and what this process had been charged then. */
  #heard: { spent: number; charged: number } | undefined;
  /** The store's clock less this process's, as the last hold measured it. */
  #offset = 0;
  #out: AllowanceOut | undefined;
  #asking: Promise<void> | undefined;
  /** Those waiting for a request in flight to settle. */
  readonly #settled = new Set<() => void>();

  constructor(options: { label: string; ledger: AllowanceLedger; clock: Clock; cap?: number | undefined; staleAfterMs?: number | undefined }) {
    this.#label = options.label;
    this.#ledger = options.ledger;
    this.#clock = options.clock;
    this.#cap = options.cap;
    this.#staleAfterMs = options.staleAfterMs ?? STALE_AFTER_MS;
  }

  /** Why the key is out now, while it is (its period not over yet by the store's clock as carried on here). */
  get out(): AllowanceOut | undefined {
    if (this.#out && this.#storeNow() >= this.#out.until) this.#out = undefined;
    return this.#out;
  }

  /** The allowance as last heard of (none until the first hold, or when the key has none). */
  get figures(): AllowanceFigures | undefined {
    const hold = this.#hold;
    const heard = this.#heard;
    if (this.#none || !hold || !heard) return undefined;
    const { credits, per } = hold.allowance;
    const left = Math.max(0, credits - heard.spent - (this.#charged - heard.charged));
    return { credits, per, period: hold.period.key, left, endsAt: hold.period.end };
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
    if (this.#usable(weight)) {
      const held = this.#hold as Held;
      held.available -= weight;
      return this.#taken(weight, held.period.key);
    }
    return this.#holdMore(weight);
  }

  /** Whether what is held takes a request of `weight` now: enough of it, in its period, and heard of lately. */
  #usable(weight: number): boolean {
    const hold = this.#hold;
    const now = epochOf(this.#clock);
    return hold !== undefined && hold.available >= weight && now + this.#offset < hold.period.end && now - this.#heardAt <= this.#staleAfterMs;
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
    if (this.#none || this.out || this.#usable(weight)) return this.take(weight);
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
    const held = await this.#ledger.hold(Math.max(0, Math.min(Math.max(weight, chunk), Math.max(weight, room)) - available));
    if (held === undefined) {
      this.#none = true;
      return;
    }
    this.#heardAt = epochOf(this.#clock);
    this.#heard = { spent: held.spent, charged: this.#charged };
    this.#offset = held.storeTime - (asked + this.#heardAt) / 2;
    // What is held now, not what was when it asked: requests took from it and gave back to it meanwhile. And no more
    // than the store says this process holds: a hold that expired meanwhile went back, and may be another's now.
    const hold = this.#hold;
    if (hold && hold.period.key === held.period.key) {
      hold.available = Math.min(hold.available + held.granted, held.mine);
      hold.allowance = held.allowance;
    } else {
      // A hold of another period (the store's clock crossed a boundary before this process's did): what the one before
      // had left is given back when the run's holds go, at its end.
      this.#hold = { period: held.period, allowance: held.allowance, available: held.granted };
    }
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
