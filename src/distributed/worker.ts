import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { PgBoss } from 'pg-boss';
import { type HeldLock, tryAdvisoryLock } from '../postgres/advisory-lock.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import { STALE_SECONDS, workerLockPrefix } from './liveness.ts';
import { expireDeadWorkers, type SharedMeter, sharedMeter } from './shared-meter.ts';
import { limitsChannel, type SharedPacerFactory, type SharedSlot, sharedPacer } from './shared-pacer.ts';
import type { StopReason } from '../schedule/classify.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';
import { type SeriesQueue, seriesQueue } from './series-queue.ts';
import { serverStatements, workerStatements } from './statements.ts';

/** How often a worker says it is alive (its row, and the jobs it holds: pg-boss's bound is `JOB_HEARTBEAT_SECONDS`). */
const BEAT_MS = 3000;

/** Stops that are the run's, not one worker's: a 401 or 402 seen by one worker stops them all. */
const RUN_WIDE: ReadonlySet<StopReason> = new Set(['unauthorized', 'payment_required', 'quota', 'stall']);

/** This worker's part of the run, printed beside the run's summary. */
export interface WorkerShare {
  id: string;
  host: string;
  pid: number;
  pages: number;
  credits: number;
}

export interface Worker {
  readonly id: string;
  readonly queue: SeriesQueue;
  /** The run's one rate limit and one budget, for this worker's scheduler. */
  readonly limits: { meter: SharedMeter; pacer: SharedPacerFactory; learns: () => boolean };
  /** Whether this worker learns the run's rate now. */
  leads(): boolean;
  /** Obeys and spreads run-wide stops through the shared row; counts this worker's share. */
  watch(scheduler: Scheduler): void;
  /** Resolves once this worker knows which of its series are still its own (at once, unless it missed its beats). */
  fresh(): Promise<void>;
  /** A page this worker committed (its row counted it in the page's own statement). */
  counted(): void;
  share(): WorkerShare;
  /** Hands back what it holds and says it left: `finished` (nothing left for it), or why it stopped. */
  leave(status: string): Promise<void>;
}

export interface WorkerOptions {
  store: PostgresStateStore;
  boss: PgBoss;
  runId: string;
  queue: string;
  /** Which planning of the run the queue is. */
  planning: number;
  seriesTotal: number;
  /** Credits per request by endpoint path. */
  weights: Readonly<Record<string, number>>;
}

/**
 * One process's membership of a distributed run: its row in `workers` (who, where, pages, credits, last heartbeat),
 * a heartbeat that keeps its row and its series' jobs alive, the run-wide stop read from and written to the shared
 * row, and the queue it takes series from.
 */
export async function startWorker(options: WorkerOptions): Promise<Worker> {
  const { store, boss, runId } = options;
  const pool = store.pool;
  const s = quoteIdentifier(store.schema);
  const sql = workerStatements(s);
  const id = `${hostname()}-${process.pid}-${randomBytes(2).toString('hex')}`;
  const share: WorkerShare = { id, host: hostname(), pid: process.pid, pages: 0, credits: 0 };
  const leaving = new AbortController();
  let scheduler: Scheduler | undefined;
  // Whether this worker learns the run's rate now (see `lead`).
  let leader = false;

  const obey = (reason: StopReason, message: string | null) => {
    if (scheduler && scheduler.stopped === undefined) scheduler.stop(reason, message ?? `another worker stopped the run (${reason})`);
  };
  // The answers of the other workers, as the leader last saw the run's totals (its own were heard as they came).
  let others: { accepted: number; rejected: number } | undefined;
  const hear = (slot: SharedSlot) => {
    const now = { accepted: slot.outcomes.accepted - slot.reported.accepted, rejected: slot.outcomes.rejected - slot.reported.rejected };
    if (leader && others && scheduler) {
      const accepted = Math.max(0, now.accepted - others.accepted);
      const rejected = Math.max(0, now.rejected - others.rejected);
      scheduler.heard({ accepted, rejected, ...(slot.rejectedSentAt === null ? {} : { rejectedSentAt: slot.rejectedSentAt }) });
    }
    others = now;
  };
  // Every slot reads the run's stop, so that a 401 one worker saw stops the others before their next request.
  const pacer = sharedPacer(pool, store.schema, runId, {
    leads: () => leader,
    onSlot: (slot) => {
      if (slot.stop) obey(slot.stop.reason as StopReason, slot.stop.message);
      hear(slot);
    },
  });
  // The worker's own session, held while this process lives: its liveness lock (others tell a dead worker from a live
  // one by it, `workersAtWork`), the leader's lock when it has it, and the LISTEN for the run's terms. A connection lost
  // (a server restart) takes the locks with it: the next beat opens a new session and takes them again.
  const leaderLock = `webdata-etl:leader:${store.schema}:${runId}`;
  const channel = limitsChannel(store.schema, runId);
  let session: HeldLock | undefined;
  const openSession = async (): Promise<HeldLock> => {
    const held = await tryAdvisoryLock(pool, `${workerLockPrefix(store.schema, runId)}${id}`);
    if (!held) throw new Error(`worker id ${id} is taken`);
    const lost = () => {
      if (session !== held) return;
      session = undefined;
      leader = false;
    };
    held.client.on('error', lost);
    held.client.on('end', lost);
    held.client.on('notification', (message) => {
      if (message.channel === channel) pacer.renew();
    });
    try {
      await held.client.query(serverStatements.listen(channel));
    } catch (error) {
      await held.release();
      throw error;
    }
    return held;
  };
  // The run's rate is learned by one worker at a time (the holder of this lock); the others follow the rate in the
  // shared row, and one of them takes over at its next beat when the leader's session goes.
  const lead = async (on: HeldLock) => (await on.client.query<{ got: boolean }>(serverStatements.tryAdvisoryLock, [leaderLock])).rows[0]?.got === true;
  session = await openSession();
  try {
    leader = await lead(session);
    await pool.query(sql.register, [runId, id, share.host, share.pid, leader]);
  } catch (error) {
    await session.release();
    throw error;
  }
  const meter = sharedMeter(pool, store.schema, runId, id, { weights: options.weights });
  await meter.refresh();
  const queue = seriesQueue({
    boss,
    queue: options.queue,
    pool,
    s,
    runId,
    planning: options.planning,
    seriesTotal: options.seriesTotal,
    stopped: () => scheduler?.stopped !== undefined || leaving.signal.aborted,
    signal: leaving.signal,
    where: `the job queue in ${store.path}`,
  });

  // When the jobs were last known to be this worker's (a successful touch), by the local monotonic clock.
  let touchedAt = performance.now();
  let beating: Promise<void> | undefined;
  // The session is checked (and opened again, after a restart) before the beat is written: a fresh beat without the
  // liveness lock would read as a worker whose process ended while the server stayed up (`workerMayBeAlive`).
  const holdSession = async () => {
    if (session) {
      try {
        if (leader) await session.client.query(serverStatements.ping);
        else leader = await lead(session);
        return;
      } catch {
        const gone = session;
        session = undefined;
        leader = false;
        await gone.release();
      }
    }
    session = await openSession();
    leader = await lead(session).catch(() => false);
  };
  const beat = async () => {
    await holdSession();
    const { rows: me } = await pool.query<{ status: string }>(sql.beat, [runId, id, leader]);
    // Presumed dead by another worker (this one missed its beats for STALE_SECONDS: frozen, or cut off): its
    // reservations were counted as spent and its series handed on. It cannot take its place back: it stops.
    if (me[0]?.status === 'dead') {
      obey('interrupted', `this worker was presumed dead (no heartbeat for ${STALE_SECONDS} s) and its series went to other workers: it stops; start it again to rejoin the run`);
    }
    await queue.touch();
    touchedAt = performance.now();
    const { rows } = await pool.query<{ stop_reason: StopReason | null; stop_message: string | null }>(sql.runStop, [runId]);
    const stop = rows[0];
    if (stop?.stop_reason) obey(stop.stop_reason, stop.stop_message);
    await expireDeadWorkers(pool, store.schema, runId, STALE_SECONDS);
  };
  // A beat that fails (the server restarting) is tried at the next: missing a few costs nothing but the series
  // handed to another worker, whose commits then stand. Time the server was down does not count against it.
  const beatOnce = () => (beating ??= beat().finally(() => (beating = undefined)));
  const timer = setInterval(() => void beatOnce().catch(() => undefined), BEAT_MS);
  timer.unref();

  return {
    id,
    queue,
    limits: { meter, pacer, learns: () => leader },
    leads: () => leader,
    watch(watched) {
      scheduler = watched;
      watched.on((event) => {
        if (event.type === 'response') {
          share.credits += event.credits;
          // What the server said of this worker's requests, for the leader's learning (the others' go via the row).
          const status = String(event.status);
          const accepted = status.startsWith('2');
          if (accepted || status === '429') pacer.report(accepted, performance.now() - event.latencyMs);
        }
        if (event.type === 'stop' && RUN_WIDE.has(event.reason)) {
          void pool.query(sql.stopRun, [runId, event.reason, event.message]).catch(() => undefined);
        }
      });
    },
    async fresh() {
      // A beat missed by more than one interval means the process was frozen or cut off: its jobs may have lapsed.
      if (performance.now() - touchedAt > 2 * BEAT_MS) await beatOnce().catch(() => undefined);
    },
    counted: () => {
      share.pages += 1;
    },
    share: () => ({ ...share }),
    async leave(status) {
      clearInterval(timer);
      leaving.abort();
      // Never fails: a worker leaving because the server went away cannot tell it so. Its jobs then go back to the
      // queue when their heartbeat lapses, and its row reads as dead: the run's outcome is what the caller hears.
      try {
        await queue.handBackAll();
        await meter.flush();
        await pool.query(sql.leave, [runId, id, status]);
      } catch {
        // As above.
      } finally {
        await session?.release();
        await boss.stop({ graceful: false, close: false }).catch(() => undefined);
      }
    },
  };
}
