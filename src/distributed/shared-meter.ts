import { WorkerExpiredError } from '../errors/worker-expired-error.ts';
import { notSent, retrying } from '../postgres/failure.ts';
import { STALE_SECONDS, workerLockPrefix } from './liveness.ts';
import { type Pool } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import type { Charge, CreditMeter, CreditSnapshot } from '../schedule/credit-meter.ts';
import { livenessStatements, meterStatements } from './statements.ts';
import { type Carried, CARRY_WAIT_MS, type CarriedRow, isEmpty, type SlotCarrier } from './slot-carrier.ts';

export interface SharedMeterOptions {
  /** Credits per request by endpoint path; paths not listed weigh `defaultWeight` (1). */
  weights?: Readonly<Record<string, number>>;
  defaultWeight?: number;
  /** The database's label, without its password, for errors. */
  where?: string;
}

export type SharedMeter = CreditMeter & {
  /** Resolves once every commit, release and uncertain so far is in the database, and credits reserved ahead are given back (rejects if one could not be written). */
  flush(): Promise<void>;
  /** Reads the run's figures again: the budget, and what other workers spent. */
  refresh(): Promise<void>;
  /** What the run's slots carry for this meter (shared-pacer.ts): its settles and a reservation ahead, in the slot's round trip. */
  readonly carrier: SlotCarrier;
};

/** Credits reserved ahead by slots and not yet claimed by a request, at most (a worker's requests waiting for slots). */
const AHEAD_AT_MOST = 8;
/** Credits reserved ahead and claimed by no request for this long are given back, so that other workers may take them. */
const AHEAD_IDLE_MS = 1000;

/** How long a request held back by reservations in flight waits before asking again: other workers' settles are not heard here. */
const SETTLE_POLL_MS = 200;

/**
 * A credit meter for the scheduler's `meter` option (docs/design.md#past-one-machine) whose budget every worker of a
 * run takes from one row of `run_limits`: a reservation is one conditional UPDATE, so no interleaving of any number of
 * workers passes the budget. Each worker's own reservations are also kept on its `workers` row, so that those of a
 * worker that died can be counted as (uncertain) spend by `expireDeadWorkers`, and never handed out again.
 */
export function sharedMeter(pool: Pool, schema: string, runId: string, workerId: string, options: SharedMeterOptions = {}): SharedMeter {
  return new SharedCreditMeter(pool, meterStatements(quoteIdentifier(schema)), runId, workerId, options);
}

type Statements = ReturnType<typeof meterStatements>;

interface FiguresRow {
  budget: number | null;
  spent: number;
  uncertain: number;
  reserved: number;
  changed?: boolean;
  alive?: boolean;
}

/** Settled reservations not yet written: written in batches, one statement for all that settled meanwhile. */
interface Batch {
  held: number;
  spent: number;
  uncertain: number;
}

const emptyBatch = (): Batch => ({ held: 0, spent: 0, uncertain: 0 });

class SharedCreditMeter implements CreditMeter {
  readonly #pool: Pool;
  readonly #statements: Statements;
  readonly #runId: string;
  readonly #workerId: string;
  readonly #weights: Readonly<Record<string, number>>;
  readonly #defaultWeight: number;
  readonly #where: string;
  /** `undefined` until read from the row; `null`: no budget. */
  #budget: number | null | undefined;
  #spent = 0;
  #uncertain = 0;
  #reserved = 0;
  readonly #byEndpoint: Record<string, number> = {};
  readonly #bySeries: Record<string, number> = {};
  #loading: Promise<void> | undefined;
  #batch = emptyBatch();
  #draining: Promise<void> | undefined;
  #failure: { error: unknown } | undefined;
  readonly #settleWaiters = new Set<() => void>();
  /** Credits reserved ahead by slots (in the database), not yet claimed by a request; and those asked for in statements on their way. */
  #ahead = 0;
  #asking = 0;
  /** When a credit reserved ahead last landed or was claimed (performance.now()). */
  #aheadAt = 0;
  #aheadTimer: ReturnType<typeof setTimeout> | undefined;
  /** Whether slots carry settles (then a settle waits `CARRY_WAIT_MS` for one), and the timer of a settle waiting. */
  #carrying = false;
  #settleTimer: ReturnType<typeof setTimeout> | undefined;
  /** Slots carrying something whose statement has not answered yet: `flush` waits for them. */
  #inSlots = 0;
  readonly #slotsLanded = new Set<() => void>();
  readonly carrier: SlotCarrier = {
    take: () => this.#take(),
    landed: (carried, row) => this.#landed(carried, row),
    failed: (carried, error) => this.#failed(carried, error),
  };

  constructor(pool: Pool, statements: Statements, runId: string, workerId: string, options: SharedMeterOptions) {
    this.#pool = pool;
    this.#statements = statements;
    this.#runId = runId;
    this.#workerId = workerId;
    this.#weights = options.weights ?? {};
    this.#defaultWeight = options.defaultWeight ?? 1;
    this.#where = options.where ?? `the shared credit budget (PostgreSQL)`;
  }

  weightOf(path: string): number {
    return this.#weights[path] ?? this.#defaultWeight;
  }

  reserve(weight: number): boolean | Promise<boolean> {
    if (this.#budget === null) return true;
    if (this.#budget === undefined) return this.#load().then(() => this.reserve(weight));
    // Spend only grows: when what was last seen of it leaves no room, nothing will.
    if (!this.couldTake(weight)) return false;
    // A credit a slot reserved ahead (for the request it was taken for): claimed without a round trip.
    if (this.#ahead >= weight) {
      this.#ahead -= weight;
      this.#aheadAt = performance.now();
      return true;
    }
    return this.#reserveShared(weight);
  }

  couldTake(weight: number): boolean {
    return this.#budget == null || this.#spent + weight <= this.#budget;
  }

  commit(charge: Charge): void {
    this.#count(charge);
    this.#settle({ held: this.#heldFor(charge), spent: charge.weight, uncertain: 0 });
  }

  release(charge: Charge): void {
    this.#settle({ held: this.#heldFor(charge), spent: 0, uncertain: 0 });
  }

  uncertain(charge: Charge): void {
    this.#count(charge);
    this.#settle({ held: this.#heldFor(charge), spent: charge.weight, uncertain: charge.weight });
  }

  whenSettled(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const done = () => {
        clearTimeout(timer);
        this.#settleWaiters.delete(done);
        signal.removeEventListener('abort', abort);
      };
      const wake = () => {
        done();
        resolve();
      };
      const abort = () => {
        done();
        reject(signal.reason);
      };
      const timer = setTimeout(wake, SETTLE_POLL_MS);
      this.#settleWaiters.add(wake);
      signal.addEventListener('abort', abort, { once: true });
    });
  }

  snapshot(): CreditSnapshot {
    const budget = this.#budget ?? null;
    return {
      budget,
      spent: this.#spent,
      uncertain: this.#uncertain,
      reserved: this.#reserved,
      remaining: budget === null ? null : budget - this.#spent - this.#reserved,
      byEndpoint: { ...this.#byEndpoint },
      bySeries: { ...this.#bySeries },
    };
  }

  async flush(): Promise<void> {
    // Once the slots on their way have answered, credits reserved ahead that no request claimed go back, and settles
    // waiting for a slot are written now.
    while (this.#inSlots > 0) await new Promise<void>((resolve) => this.#slotsLanded.add(resolve));
    this.#giveBackAhead();
    clearTimeout(this.#settleTimer);
    this.#settleTimer = undefined;
    if (this.#batch.held !== 0 || this.#batch.spent !== 0) this.#draining ??= this.#drain();
    while (this.#draining) await this.#draining;
    const failure = this.#failure;
    this.#failure = undefined;
    if (failure) throw failure.error;
  }

  async refresh(): Promise<void> {
    const rows = await this.#query(this.#statements.refresh, [this.#runId], true);
    this.#see(this.#rowOf(rows));
  }

  #load(): Promise<void> {
    this.#loading ??= this.refresh().finally(() => {
      this.#loading = undefined;
    });
    return this.#loading;
  }

  /**
   * Retried as if idempotent: an answer lost after the update ran leaves `weight` reserved that no request holds,
   * which the budget then lacks (and the worker's expiry turns into uncertain spend); it is never handed out twice.
   */
  async #reserveShared(weight: number): Promise<boolean> {
    const rows = await this.#query(this.#statements.reserve, [this.#runId, this.#workerId, weight], true);
    const row = this.#rowOf(rows);
    this.#see(row);
    if (!row.alive) throw new WorkerExpiredError(`${this.#where}: worker ${this.#workerId} of run ${this.#runId} was presumed dead (or never joined): it may take no more credits`);
    return row.changed === true;
  }

  /** Without a budget nothing was reserved in the row: only spend is counted. */
  #heldFor(charge: Charge): number {
    return this.#budget == null ? 0 : charge.weight;
  }

  #count(charge: Charge): void {
    this.#byEndpoint[charge.path] = (this.#byEndpoint[charge.path] ?? 0) + charge.weight;
    this.#bySeries[charge.series] = (this.#bySeries[charge.series] ?? 0) + charge.weight;
  }

  #settle(delta: Batch): void {
    this.#batch.held += delta.held;
    this.#batch.spent += delta.spent;
    this.#batch.uncertain += delta.uncertain;
    // Carried by the next slot if one comes soon (slots carry settles), else written alone.
    if (!this.#carrying) this.#draining ??= this.#drain();
    else this.#settleTimer ??= setTimeout(() => {
      this.#settleTimer = undefined;
      this.#draining ??= this.#drain();
    }, CARRY_WAIT_MS);
  }

  /** What the next slot's statement carries: the settles waiting, and a credit reserved ahead for its request while a budget holds. */
  #take(): Carried {
    this.#carrying = true;
    const batch = this.#batch;
    this.#batch = emptyBatch();
    const weight = this.#defaultWeight;
    const prepay = this.#budget != null && this.#ahead + this.#asking + weight <= AHEAD_AT_MOST && this.couldTake(weight) ? weight : 0;
    this.#asking += prepay;
    const carried = { ...batch, prepay };
    if (!isEmpty(carried)) this.#inSlots += 1;
    return carried;
  }

  #landed(carried: Carried, row: CarriedRow | undefined): void {
    // No row: the run has none, and nothing was applied; the slot's own error says so.
    if (!row) return this.#failed(carried, undefined);
    this.#asking -= carried.prepay;
    this.#see(row);
    if (row.took) {
      this.#ahead += carried.prepay;
      this.#aheadAt = performance.now();
      this.#aheadTimer ??= setTimeout(() => this.#idleAhead(), AHEAD_IDLE_MS);
    }
    this.#slotDone(carried);
  }

  /**
   * A carried batch is never sent again once it may have reached the server (as `#write`): applied twice, it would
   * return its releases to the budget twice. One that surely did not is written alone. A reservation ahead whose
   * answer was lost stays reserved in the database, as a lost `reserve` does.
   */
  #failed(carried: Carried, error: unknown): void {
    this.#asking -= carried.prepay;
    if (carried.held !== 0 || carried.spent !== 0) {
      if (error === undefined || notSent(error)) this.#settle(carried);
      else this.#failure ??= { error };
    }
    this.#slotDone(carried);
  }

  #slotDone(carried: Carried): void {
    if (isEmpty(carried)) return;
    this.#inSlots -= 1;
    this.#wakeSettleWaiters();
    for (const landed of [...this.#slotsLanded]) landed();
    this.#slotsLanded.clear();
  }

  /** Credits reserved ahead that no request claimed for `AHEAD_IDLE_MS` go back (other workers may need them at the budget's end). */
  #idleAhead(): void {
    this.#aheadTimer = undefined;
    if (this.#ahead === 0) return;
    const idle = performance.now() - this.#aheadAt;
    if (idle >= AHEAD_IDLE_MS) this.#giveBackAhead();
    else this.#aheadTimer = setTimeout(() => this.#idleAhead(), AHEAD_IDLE_MS - idle);
  }

  #giveBackAhead(): void {
    clearTimeout(this.#aheadTimer);
    this.#aheadTimer = undefined;
    const ahead = this.#ahead;
    this.#ahead = 0;
    if (ahead > 0) this.#settle({ held: ahead, spent: 0, uncertain: 0 });
  }

  async #drain(): Promise<void> {
    // Settles of the same turn of the event loop go in one statement.
    await Promise.resolve();
    try {
      while (this.#batch.held !== 0 || this.#batch.spent !== 0) {
        const batch = this.#batch;
        this.#batch = emptyBatch();
        await this.#write(batch);
        this.#wakeSettleWaiters();
      }
      // A release without a budget writes nothing, yet may be what a waiter waits for.
      this.#wakeSettleWaiters();
    } finally {
      this.#draining = undefined;
    }
  }

  /**
   * Not retried once sent: a batch applied twice would return its releases to the budget twice. A batch whose answer
   * was lost stays unknown: its reservations then stay held (the budget is never passed), and `flush` reports it.
   */
  async #write(batch: Batch): Promise<void> {
    try {
      const values = [this.#runId, this.#workerId, batch.held, batch.spent, batch.uncertain];
      this.#see(this.#rowOf(await this.#query(this.#statements.settle, values, false)));
    } catch (error) {
      this.#failure ??= { error };
    }
  }

  #wakeSettleWaiters(): void {
    for (const wake of [...this.#settleWaiters]) wake();
  }

  #query(text: string, values: unknown[], idempotent: boolean): Promise<FiguresRow[]> {
    return retrying(this.#where, async () => (await this.#pool.query<FiguresRow>(text, values)).rows, { idempotent });
  }

  #rowOf(rows: FiguresRow[]): FiguresRow {
    const row = rows[0];
    if (!row) throw new Error(`${this.#where}: run ${this.#runId} has no row in run_limits: a distributed run's limits are written when it is planned`);
    return row;
  }

  /** Answers of statements in flight together may arrive in any order: spend only grows, so the larger is the later. */
  #see(row: FiguresRow): void {
    this.#budget = row.budget === null ? null : Number(row.budget);
    this.#spent = Math.max(this.#spent, Number(row.spent));
    this.#uncertain = Math.max(this.#uncertain, Number(row.uncertain));
    this.#reserved = Number(row.reserved);
  }
}

/**
 * Marks the workers of a run whose beat is older than `staleSeconds` of the server's time up (by the database's clock:
 * `beatFresh`) as dead, and counts what they held reserved as spent and uncertain: their requests may have been sent
 * and charged, so those credits never return to the budget. One statement, so that a worker is either still alive for
 * its own commits or dead with its reservations moved, never both. Returns how many workers it marked.
 */
export function expireDeadWorkers(pool: Pool, schema: string, runId: string, staleSeconds: number, where = 'the shared credit budget (PostgreSQL)'): Promise<number> {
  return expire(pool, livenessStatements(quoteIdentifier(schema)).expireDeadWorkers, [runId, staleSeconds], where);
}

/**
 * The same, for every worker that cannot be at work (`workerMayBeAlive`): a run planned again (none may be at work,
 * or it would have been joined) takes what its earlier workers left for theirs.
 */
export function expireGoneWorkers(pool: Pool, schema: string, runId: string, where = 'the shared credit budget (PostgreSQL)'): Promise<number> {
  return expire(pool, livenessStatements(quoteIdentifier(schema)).expireGoneWorkers, [runId, STALE_SECONDS, workerLockPrefix(schema, runId)], where);
}

/** Runs a statement that marks workers as dead (`expireWorkers` in statements.ts): how many it marked. */
async function expire(pool: Pool, text: string, values: unknown[], where: string): Promise<number> {
  // Marking is idempotent: a retry finds the workers already dead and moves nothing again.
  const rows = await retrying(where, async () => (await pool.query<{ marked: string }>(text, values)).rows, { idempotent: true });
  return Number(rows[0]?.marked ?? 0);
}
