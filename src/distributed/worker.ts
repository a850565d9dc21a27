import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { PgBoss } from 'pg-boss';
import { quoteIdentifier } from '../sql-identifier.ts';
import { STALE_SECONDS } from './liveness.ts';
import { expireDeadWorkers, type SharedMeter, sharedMeter } from './shared-meter.ts';
import { sharedKeys } from './shared-key.ts';
import { type SharedPacerFactory, type SharedSlot, sharedPacer } from './shared-pacer.ts';
import type { FleetKeys } from '../schedule/fleet-key.ts';
import type { StopReason } from '../schedule/classify.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { WorkerShare } from '../host/run-host.ts';
import type { StateStore } from '../state/interfaces.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';
import { SeriesQueue } from './series-queue.ts';
import { workerStatements } from './statements.ts';
import { WorkerSession } from './worker-session.ts';
import { firstPhase, phase } from '../phase-marks.ts';

/** How often a worker says it is alive (its row, and the jobs it holds: pg-boss's bound is `JOB_HEARTBEAT_SECONDS`). */
const BEAT_MS = 3000;

/** Stops that are the run's, not one worker's: a 401 or 402 seen by one worker stops them all. */
const RUN_WIDE: ReadonlySet<StopReason> = new Set(['unauthorized', 'payment_required', 'quota', 'stall']);

export interface RunWorkerOptions {
  store: PostgresStateStore;
  boss: PgBoss;
  runId: string;
  queue: string;
  /** Which planning of the run the queue is. */
  planningNumber: number;
  seriesTotal: number;
  /** Credits per request by endpoint path. */
  weights: Readonly<Record<string, number>>;
}

/**
 * One process's membership of a distributed run (a worker of the run, not a thread): its row in `workers` (who,
 * where, pages, credits, last heartbeat), a heartbeat that keeps its row and its series' jobs alive, the run-wide stop
 * read from and written to the shared row, and the queue it takes series from.
 */
export class RunWorker {
  readonly id: string;
  readonly queue: SeriesQueue;
  /** The run's state store as this worker commits to it: behind the series-row fence (`PostgresStateStore.fenced`). */
  readonly store: StateStore;
  /** The run's one rate limit and one budget, for this worker's scheduler; in a pool, each key's rate limit, share and retirements. */
  readonly limits: { meter: SharedMeter; pacer: SharedPacerFactory; learns: () => boolean; fleet: FleetKeys };
  readonly #store: PostgresStateStore;
  readonly #boss: PgBoss;
  readonly #runId: string;
  readonly #sql: ReturnType<typeof workerStatements>;
  readonly #share: WorkerShare;
  readonly #leaving = new AbortController();
  readonly #session: WorkerSession;
  readonly #pacer: SharedPacerFactory;
  readonly #meter: SharedMeter;
  #scheduler: Scheduler | undefined;
  // The answers of the other workers, as the leader last saw the run's totals (its own were heard as they came), by
  // the key of a pool whose row the slot came from ('' : the run's row, one key).
  readonly #others = new Map<string, { accepted: number; rejected: number }>();
  // When the jobs were last known to be this worker's (a successful touch), by the local monotonic clock.
  #touchedAt = 0;
  #beating: Promise<void> | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;

  /** Joins the run as a new worker: its session, its row, the run's figures, and its beat. */
  static async start(options: RunWorkerOptions): Promise<RunWorker> {
    const worker = new RunWorker(options);
    await worker.#join();
    return worker;
  }

  private constructor(options: RunWorkerOptions) {
    const { store, boss, runId } = options;
    this.#store = store;
    this.#boss = boss;
    this.#runId = runId;
    this.#sql = workerStatements(quoteIdentifier(store.schema));
    this.id = `${hostname()}-${process.pid}-${randomBytes(2).toString('hex')}`;
    this.#share = { id: this.id, host: hostname(), pid: process.pid, pages: 0, credits: 0 };
    this.#meter = sharedMeter(store.pool, store.schema, runId, this.id, { weights: options.weights });
    // Every slot reads the run's stop, so that a 401 one worker saw stops the others before their next request; the
    // run's slots carry the meter's settles and reservations (one round trip on the run's row a page, not three).
    this.#pacer = sharedPacer(store.pool, store.schema, runId, {
      leads: () => this.#session.leader,
      carry: { carrier: this.#meter.carrier, workerId: this.id },
      onSlot: (slot) => {
        if (slot.stop) this.#obey(slot.stop.reason as StopReason, slot.stop.message);
        this.#hear(slot);
      },
    });
    this.#session = new WorkerSession({ pool: store.pool, schema: store.schema, runId, workerId: this.id, onTermsChanged: (told) => this.#pacer.renew(told), onSeriesEnded: () => this.queue.wake() });
    this.limits = { meter: this.#meter, pacer: this.#pacer, learns: () => this.#session.leader, fleet: sharedKeys(store.pool, store.schema, runId, this.#pacer) };
    this.queue = new SeriesQueue({
      boss,
      queue: options.queue,
      pool: store.pool,
      s: quoteIdentifier(store.schema),
      schema: store.schema,
      runId,
      planningNumber: options.planningNumber,
      seriesTotal: options.seriesTotal,
      stopped: () => this.#scheduler?.stopped !== undefined || this.#leaving.signal.aborted,
      signal: this.#leaving.signal,
      where: `the job queue in ${store.path}`,
    });
    this.store = store.fenced({ workerId: this.id, finish: (seriesId, client) => this.queue.finish(seriesId, client), committed: () => this.counted() });
  }

  /** Whether this worker learns the run's rate now. */
  leads(): boolean {
    return this.#session.leader;
  }

  /** Obeys and spreads run-wide stops through the shared row; counts this worker's share. */
  watch(scheduler: Scheduler): void {
    this.#scheduler = scheduler;
    scheduler.on((event) => {
      if (event.type === 'request') firstPhase('first-request');
      if (event.type === 'response') {
        firstPhase('first-answer');
        this.#share.credits += event.credits;
        // What the server said of this worker's requests, for the leader's learning (the others' go via the row).
        const status = String(event.status);
        const accepted = status.startsWith('2');
        if (accepted || status === '429') this.#pacer.report(accepted, performance.now() - event.latencyMs, event.key);
      }
      if (event.type === 'stop' && RUN_WIDE.has(event.reason)) {
        void this.#store.pool.query(this.#sql.stopRun, [this.#runId, event.reason, event.message]).catch(() => undefined);
      }
    });
  }

  /**
   * Beats now if the last beat is late, so that this worker knows which of its series are still its own before its
   * next page: resolves at once unless it missed its beats.
   */
  async beatIfLate(): Promise<void> {
    // A beat missed by more than one interval means the process was frozen or cut off: its jobs may have lapsed.
    if (performance.now() - this.#touchedAt > 2 * BEAT_MS) await this.#beatOnce().catch(() => undefined);
  }

  /** A page this worker committed (its row counted it in the page's own statement). */
  counted(): void {
    this.#share.pages += 1;
  }

  share(): WorkerShare {
    return { ...this.#share };
  }

  /** Hands back what it holds and says it left: `finished` (nothing left for it), or why it stopped. */
  async leave(status: string): Promise<void> {
    clearInterval(this.#timer);
    this.#leaving.abort();
    // Never fails: a worker leaving because the server went away cannot tell it so. Its jobs then go back to the
    // queue when their heartbeat lapses, and its row reads as dead: the run's outcome is what the caller hears.
    try {
      await this.queue.handBackAll();
      await this.#meter.flush();
      await this.#store.pool.query(this.#sql.leave, [this.#runId, this.id, status]);
    } catch {
      // As above.
    } finally {
      phase('handed-back');
      await this.#session.release();
      await this.#boss.stop({ graceful: false, close: false }).catch(() => undefined);
      phase('boss-stopped');
    }
  }

  async #join(): Promise<void> {
    await this.#session.open();
    try {
      await this.#store.pool.query(this.#sql.register, [this.#runId, this.id, this.#share.host, this.#share.pid, this.#session.leader]);
    } catch (error) {
      await this.#session.release();
      throw error;
    }
    await this.#meter.refresh();
    this.#touchedAt = performance.now();
    this.#timer = setInterval(() => void this.#beatOnce().catch(() => undefined), BEAT_MS);
    this.#timer.unref();
  }

  #obey(reason: StopReason, message: string | null): void {
    const scheduler = this.#scheduler;
    if (scheduler && scheduler.stopped === undefined) scheduler.stop(reason, message ?? `another worker stopped the run (${reason})`);
  }

  /** The leader hears the other workers' answers, as the run's totals in the slot say them, for its learning. */
  #hear(slot: SharedSlot): void {
    const now = { accepted: slot.outcomes.accepted - slot.reported.accepted, rejected: slot.outcomes.rejected - slot.reported.rejected };
    const others = this.#others.get(slot.key ?? '');
    if (this.#session.leader && others && this.#scheduler) {
      const accepted = Math.max(0, now.accepted - others.accepted);
      const rejected = Math.max(0, now.rejected - others.rejected);
      this.#scheduler.heard({ accepted, rejected, ...(slot.rejectedSentAt === null ? {} : { rejectedSentAt: slot.rejectedSentAt }) }, slot.key);
    }
    this.#others.set(slot.key ?? '', now);
  }

  /**
   * A beat that fails (the server restarting) is tried at the next: missing a few costs nothing but the series
   * handed to another worker, whose commits then stand. Time the server was down does not count against it.
   */
  #beatOnce(): Promise<void> {
    return (this.#beating ??= this.#beat().finally(() => (this.#beating = undefined)));
  }

  async #beat(): Promise<void> {
    const pool = this.#store.pool;
    // The session is checked (and opened again, after a restart) before the beat is written.
    await this.#session.hold();
    const { rows: me } = await pool.query<{ status: string; stop_reason: StopReason | null; stop_message: string | null }>(this.#sql.beat, [this.#runId, this.id, this.#session.leader]);
    // Presumed dead by another worker (this one missed its beats for STALE_SECONDS: frozen, or cut off): its
    // reservations were counted as spent and its series handed on. It cannot take its place back: it stops.
    if (me[0]?.status === 'dead') {
      this.#obey('presumed_dead', `this worker was presumed dead (no heartbeat for ${STALE_SECONDS} s) and its series went to other workers: it stops; start it again to rejoin the run`);
    }
    await this.queue.touch();
    this.#touchedAt = performance.now();
    const stop = me[0];
    if (stop?.stop_reason) this.#obey(stop.stop_reason, stop.stop_message);
    await expireDeadWorkers(pool, this.#store.schema, this.#runId, STALE_SECONDS);
  }
}
