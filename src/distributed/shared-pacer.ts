import { createHash } from 'node:crypto';
import { retrying } from '../postgres/failure.ts';
import { type Pool } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import type { Clock } from '../schedule/clock.ts';
import type { Pacer } from '../schedule/pacer.ts';
import { keyStatements, pacerStatements } from './statements.ts';
import { type KeyRetirement, retirementsOf, type SlotRow } from './slot-row.ts';
import { type Carried, type CarriedRow, isEmpty, type SlotCarrier } from './slot-carrier.ts';

export interface SharedPacerOptions {
  /** Whether this worker holds the run's rate leadership now: only the leader's rate changes reach the row. */
  leads: () => boolean;
  /** The database's label, without its password, for errors. */
  where?: string;
  /** Hears every slot the database hands out here (tests, diagnostics). */
  onSlot?: (slot: SharedSlot) => void;
  /**
   * The run's shared meter of this worker (`workerId`): the run's row's slots carry its settles and reserve a credit
   * ahead for their requests, in the slot's own round trip (`acquireCarrying` in statements.ts). A key's row carries nothing.
   */
  carry?: { carrier: SlotCarrier; workerId: string };
}

/**
 * A pacer factory for the scheduler's `pacer` option (docs/design.md#past-one-machine) whose slots every worker of a
 * run takes from one row of `run_limits`: one rate limit however many machines share it. The row's `next_at` is the
 * theoretical arrival time of the next free slot, advanced with the database's clock, so that workers with skewed
 * clocks still space their requests on one time line; each worker then waits out its slot by its own clock. In a pool
 * of keys, each key's pacer (the factory given its label) takes its slots from that key's row of `run_key_limits`, with
 * the same rules: one rate limit per key however many machines hold it.
 */
export function sharedPacer(pool: Pool, schema: string, runId: string, options: SharedPacerOptions): SharedPacerFactory {
  const s = quoteIdentifier(schema);
  const where = options.where ?? `the shared rate limit (PostgreSQL, schema "${schema}")`;
  const channel = limitsChannel(schema, runId);
  const rows = new Map<string | undefined, Shared>();
  const sharedFor = (key: string | undefined): Shared => {
    let shared = rows.get(key);
    if (!shared) {
      const statements = pacerStatements(s, key !== undefined);
      const carry = key === undefined ? options.carry : undefined;
      shared = { pool, runId, key, statements, carry, ensure: keyStatements(s).ensure, where, leads: options.leads, onSlot: options.onSlot, unreported: [], reported: { accepted: 0, rejected: 0 }, offsetMs: undefined, channel, pacers: new Set(), intervals: [], retirements: [] };
      rows.set(key, shared);
    }
    return shared;
  };
  return Object.assign((requestsPerSecond: number, clock: Clock, key?: string) => new SharedPacer(sharedFor(key), requestsPerSecond, clock), {
    report: (accepted: boolean, sentAt: number, key?: string) => {
      const shared = sharedFor(key);
      shared.unreported.push({ accepted, sentAt, pacedMs: pacedAt(shared, sentAt) });
    },
    renew: (told?: string) => {
      // A key's change is told with its label ('rate b'): only that key's pacers take their slots again.
      const key = told?.includes(' ') ? told.slice(told.indexOf(' ') + 1) : undefined;
      for (const [label, shared] of rows) if (key === undefined || label === key) for (const pacer of shared.pacers) pacer.renew();
    },
    retirements: (key: string) => sharedFor(key).retirements,
    channel,
  });
}

/** The pacer factory for the scheduler, and where this worker reports its answers (they go with its next slot). */
export type SharedPacerFactory = ((requestsPerSecond: number, clock: Clock, key?: string) => Pacer) & {
  /** An answer this worker got: accepted (2xx) or not (429), for a request sent at `sentAt` (the scheduler's clock), with the key of a pool it went with. */
  report(accepted: boolean, sentAt: number, key?: string): void;
  /** The run's rate or pause changed (a notification on `channel`, its payload `told`): slots waited for are taken again. */
  renew(told?: string): void;
  /** A pool's key's retirements, as its row said at its latest slot. */
  retirements(key: string): readonly KeyRetirement[];
  /** The notification channel of the run's terms, for the worker to LISTEN on. */
  readonly channel: string;
};

/** The channel on which a run's changes of rate and pause are told: a name of the run's own, short and safe. */
export function limitsChannel(schema: string, runId: string): string {
  return `webdata_limits_${createHash('sha256').update(`${schema}\n${runId}`).digest('hex').slice(0, 24)}`;
}

/** One row's side of the pacers made here: the run's (`key` undefined) or a pool's key's. */
interface Shared {
  pool: Pool;
  runId: string;
  /** The pool's key whose row it is; undefined: the run's row. */
  key: string | undefined;
  statements: ReturnType<typeof pacerStatements>;
  /** The meter whose business the row's slots carry (the run's row only). */
  carry: SharedPacerOptions['carry'];
  /** Writes a key's row, if no worker has yet. */
  ensure: string;
  where: string;
  leads: () => boolean;
  onSlot: ((slot: SharedSlot) => void) | undefined;
  /** Answers got since the last slot, to report with the next: accepted (2xx) or rejected (429), when sent, and the interval it was paced under. */
  unreported: { accepted: boolean; sentAt: number; pacedMs: number | undefined }[];
  /** The database's clock (epoch ms) minus this worker's, as the last slot showed it. */
  offsetMs: number | undefined;
  /** Answers this worker has reported so far. */
  reported: { accepted: number; rejected: number };
  /** Where changes of the run's terms are told (pg_notify). */
  channel: string;
  /** The pacers made here (one per scheduler), to renew when the terms change. */
  pacers: Set<SharedPacer>;
  /**
   * The run's interval as this worker paced under it, from when (its clock), latest last and a few kept: a 429 is
   * reported with the interval its request was sent under, so that one sent before a cut reached this worker is
   * not taken for a failure of the slower rate (docs/distributed-design.md#one-rate-shared).
   */
  intervals: { from: number; intervalMs: number }[];
  /** A key's retirements as its row said at the latest slot (replaced in place, so readers keep the array). */
  retirements: KeyRetirement[];
}

/** How many changes of the interval a worker keeps: answers come back within seconds, changes are seconds apart. */
const INTERVALS_KEPT = 16;

/** The interval this worker paced under at `sentAt` (its clock): undefined before its first slot. */
function pacedAt(shared: Shared, sentAt: number): number | undefined {
  const { intervals } = shared;
  return (intervals.findLast((entry) => entry.from <= sentAt) ?? intervals[0])?.intervalMs;
}

/** The run's interval as this worker paces under it from `from` (its clock): a slot read it, or it set it leading. */
function pacingUnder(shared: Shared, intervalMs: number, from: number): void {
  if (shared.intervals.at(-1)?.intervalMs === intervalMs) return;
  shared.intervals.push({ from, intervalMs });
  if (shared.intervals.length > INTERVALS_KEPT) shared.intervals.shift();
}

/** What one acquire's statement answers: the caller's slot, by the database's clock. */
export interface SharedSlot {
  intervalMs: number;
  /** From the statement's end to the slot; negative: the slot has begun. */
  waitMs: number;
  /** The slot, milliseconds since the Unix epoch by the database's clock (for tests and diagnostics). */
  slotEpochMs: number;
  /** The run's stop, once a worker wrote one (a 401, a 402): every worker hears it at its next slot, for free. */
  stop: { reason: string; message: string | null } | null;
  /** Answers every worker of the run reported so far: accepted (2xx) and rejected (429). */
  outcomes: { accepted: number; rejected: number };
  /** The part of them this worker reported (so that the rest is the other workers'). */
  reported: { accepted: number; rejected: number };
  /** When the latest rejected request any worker reported was sent, on this worker's clock (null: none yet). */
  rejectedSentAt: number | null;
  /** The pool's key whose row gave the slot; undefined: the run's row (one key). */
  key?: string;
}

class SharedPacer implements Pacer {
  readonly #shared: Shared;
  readonly #clock: Clock;
  // The interval last read from (or written to) the row, and the rate this worker last set: reported as is while the
  // row agrees, so that the throttle does not see 1000 / (1000 / r) !== r and set the same rate again and again.
  #intervalMs: number;
  #ownRate: number;
  #pausedUntil = Number.NEGATIVE_INFINITY;
  #pauses = 0;
  // Slots granted under terms that changed since (a new rate, a pause, here or by another worker) are taken again.
  #terms = 0;
  #changed = new AbortController();
  // Writes of rate and pauses are fire-and-forget (the interface's setters are synchronous); an acquire waits for them,
  // so that this worker's next slot already obeys the pause it wrote, and reports a write that failed.
  #writes: Promise<void> = Promise.resolve();
  #failure: { error: unknown } | undefined;

  constructor(shared: Shared, requestsPerSecond: number, clock: Clock) {
    this.#shared = shared;
    this.#clock = clock;
    this.#ownRate = requestsPerSecond;
    this.#intervalMs = intervalOf(requestsPerSecond);
    // A key's row is written by the first worker holding the key, with its rate: a key the leader does not hold is
    // paced all the same (learning it waits for a leader holding it). The run's row likewise takes the first worker's
    // rate, leader or not: every worker starts at the same one (the configured rate, or the limit the state store
    // remembers, read by each), and a follower whose first slots came before the leader's seed landed took them at
    // the row's interval of 0, unpaced: its whole concurrency at once, into a limit it was to start under.
    if (shared.key !== undefined) this.#write(shared.ensure, [shared.runId, shared.key, this.#intervalMs, null]);
    else this.#write(shared.statements.seed, [shared.runId, this.#intervalMs]);
    shared.pacers.add(this);
  }

  get rate(): number {
    return this.#intervalMs === intervalOf(this.#ownRate) ? this.#ownRate : rateOf(this.#intervalMs);
  }

  get pausedUntil(): number {
    return this.#pausedUntil;
  }

  setRate(requestsPerSecond: number): void {
    // Other workers follow the leader's rate, which each acquire reads back.
    if (requestsPerSecond === this.rate || !this.#shared.leads()) return;
    this.#ownRate = requestsPerSecond;
    this.#intervalMs = intervalOf(requestsPerSecond);
    pacingUnder(this.#shared, this.#intervalMs, this.#clock.now());
    this.#change(this.#shared.statements.setInterval, this.#intervalMs);
    this.renew();
  }

  pauseUntil(at: number): void {
    if (at <= this.#pausedUntil) return;
    this.#pausedUntil = at;
    this.#pauses += 1;
    // The 429 that paused this worker is reported first: the pause's notification renews the leader's waiting slots,
    // and the slot it takes again then carries this 429 to its learner at once, not with this worker's next slot
    // after the pause (the cut came half a second late at a fleet's start: docs/distributed-design.md#one-rate-shared).
    this.#reportNow();
    // Sent as a length of time from now: the database turns it into its own time, whatever this machine's clock says.
    this.#change(this.#shared.statements.pause, at - this.#clock.now());
  }

  /** The run's rate or pause changed (told by the database): slots waited for now are taken again under the new terms. */
  renew(): void {
    this.#terms += 1;
    this.#changed.abort();
    this.#changed = new AbortController();
  }

  async acquire(signal?: AbortSignal): Promise<number> {
    for (;;) {
      signal?.throwIfAborted();
      await this.#settleWrites();
      const pauses = this.#pauses;
      const terms = this.#terms;
      const changed = this.#changed.signal;
      const taken = await this.#take();
      const now = this.#clock.now();
      // This worker's own pause also holds by its own clock: the database's reading of it is off by a round trip.
      const slot = Math.max(now + taken.waitMs, now, this.#pausedUntil);
      if (slot > now) {
        try {
          await this.#clock.sleep(slot - now, signal ? AbortSignal.any([signal, changed]) : changed);
        } catch (error) {
          if (signal?.aborted || !changed.aborted) throw error;
        }
      }
      if (terms !== this.#terms) continue;
      // A pause this worker heard of while waiting (a 429) holds back the slot it got, as the local pacer re-reserves;
      // the slot is lost, which only spaces requests further apart. Pauses other workers write are obeyed from the
      // next acquire on.
      if (pauses === this.#pauses || this.#pausedUntil <= slot) return slot;
    }
  }

  /**
   * Retried as if idempotent although it is not: an answer lost after the update ran leaves a slot nobody uses, which
   * only spaces requests further apart: the limit is never passed. Failing the request instead would cost more.
   */
  async #take(): Promise<SharedSlot> {
    const { pool, statements, runId, where } = this.#shared;
    const offset = this.#shared.offsetMs;
    const { report, accepted, values } = this.#unreported();
    let rows: SlotRow[];
    // What the meter has for this slot to carry: on the first attempt only (a retry carries nothing: see `failed`).
    const carry = this.#shared.carry;
    let carried: Carried | undefined = carry?.carrier.take();
    try {
      rows = await retrying(where, async () => {
        const sent = carried;
        carried = undefined;
        if (!sent || isEmpty(sent) || !carry || !statements.acquireCarrying) return (await pool.query<SlotRow>(statements.acquire, values)).rows;
        try {
          const answered = (await pool.query<SlotRow & CarriedRow>(statements.acquireCarrying, [...values, carry.workerId, sent.held, sent.spent, sent.uncertain, sent.prepay])).rows;
          carry.carrier.landed(sent, answered[0]);
          return answered;
        } catch (error) {
          carry.carrier.failed(sent, error);
          throw error;
        }
      }, { idempotent: true });
    } catch (error) {
      this.#shared.unreported.push(...report);
      throw error;
    }
    const row = rows[0];
    this.#shared.reported.accepted += accepted;
    this.#shared.reported.rejected += Number(row?.counted_rejected ?? 0);
    if (!row) throw new Error(`${where}: run ${runId} has no row in ${this.#shared.key === undefined ? 'run_limits' : `run_key_limits for key ${this.#shared.key}`}: a distributed run's limits are written when it is planned, a key's when a worker holding it joins`);
    if (this.#shared.key !== undefined) this.#shared.retirements.splice(0, Infinity, ...retirementsOf(row));
    const taken = {
      intervalMs: Number(row.interval_ms),
      waitMs: Number(row.wait_ms),
      slotEpochMs: Number(row.slot_epoch_ms),
      stop: row.stop_reason === null ? null : { reason: row.stop_reason, message: row.stop_message },
      outcomes: { accepted: Number(row.accepted), rejected: Number(row.rejected) },
      reported: { ...this.#shared.reported },
      rejectedSentAt: row.rejected_sent_epoch_ms === null || offset === undefined ? null : Number(row.rejected_sent_epoch_ms) - offset,
      ...(this.#shared.key === undefined ? {} : { key: this.#shared.key }),
    };
    // The slot by both clocks: how far the database's is from this worker's (one round trip's error at most).
    this.#shared.offsetMs = taken.slotEpochMs - (this.#clock.now() + taken.waitMs);
    this.#intervalMs = taken.intervalMs;
    pacingUnder(this.#shared, taken.intervalMs, this.#clock.now());
    this.#shared.onSlot?.(taken);
    return taken;
  }

  /**
   * The answers got since the last report, taken now, so that what comes in while a statement is on its way goes with
   * the next one (a failure puts them back), as the values of `acquire` and `report`. Each 429 goes with when it was
   * sent (the database's clock, once known) and the interval it was paced under: the statement counts those paced no
   * faster than the row's interval now, so that one a cut already answers is not counted (another worker's cut may
   * reach this worker only after its request left).
   */
  #unreported(): { report: Shared['unreported']; accepted: number; values: unknown[] } {
    const report = this.#shared.unreported.splice(0);
    const offset = this.#shared.offsetMs;
    const rejected = report.filter((answer) => !answer.accepted);
    const rejectedAt = rejected.map((answer) => (offset === undefined ? null : answer.sentAt + offset));
    const rejectedPaced = rejected.map((answer) => answer.pacedMs ?? null);
    const accepted = report.length - rejected.length;
    return { report, accepted, values: [this.#shared.runId, accepted, rejectedAt, rejectedPaced, ...this.#label()] };
  }

  /**
   * Reports the answers got since the last slot without taking one (in line with this pacer's writes). One that fails
   * is put back, for the next slot to carry: a report is never worth failing the run for.
   */
  #reportNow(): void {
    if (this.#shared.unreported.length === 0) return;
    const { pool, statements, where } = this.#shared;
    const { report, accepted, values } = this.#unreported();
    this.#writes = this.#writes
      // Counting twice is worse than not at all: retried only where it cannot have reached the server.
      .then(() => retrying(where, () => pool.query<{ counted_rejected: number }>(statements.report, values), { idempotent: false }))
      .then(
        (result) => {
          this.#shared.reported.accepted += accepted;
          this.#shared.reported.rejected += Number(result.rows[0]?.counted_rejected ?? 0);
        },
        () => {
          this.#shared.unreported.push(...report);
        },
      );
  }

  /** The label parameter of a key's row's statements (none for the run's row). */
  #label(): string[] {
    return this.#shared.key === undefined ? [] : [this.#shared.key];
  }

  /** A change of the row's terms ($2 `value`), told on the run's channel. */
  #change(text: string, value: number): void {
    this.#write(text, [this.#shared.runId, value, this.#shared.channel, ...this.#label()]);
  }

  #write(text: string, values: unknown[]): void {
    const { pool, where } = this.#shared;
    // Setting a value, or raising one to a maximum: safe to repeat.
    this.#writes = this.#writes
      .then(() => retrying(where, () => pool.query(text, values), { idempotent: true }))
      .then(
        () => undefined,
        (error: unknown) => {
          this.#failure ??= { error };
        },
      );
  }

  async #settleWrites(): Promise<void> {
    await this.#writes;
    const failure = this.#failure;
    this.#failure = undefined;
    if (failure) throw failure.error;
  }
}

function intervalOf(requestsPerSecond: number): number {
  return Number.isFinite(requestsPerSecond) && requestsPerSecond > 0 ? 1000 / requestsPerSecond : 0;
}

function rateOf(intervalMs: number): number {
  return intervalMs > 0 ? 1000 / intervalMs : Number.POSITIVE_INFINITY;
}
