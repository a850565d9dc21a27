import { type HeldLock, tryAdvisoryLock } from '../postgres/advisory-lock.ts';
import type { Pool } from '../postgres/pools.ts';
import { workerLockPrefix } from './liveness.ts';
import { seriesEndedChannel } from './series-queue.ts';
import { limitsChannel } from './shared-pacer.ts';
import { serverStatements } from './statements.ts';

export interface WorkerSessionOptions {
  pool: Pool;
  /** The state schema, as it is named (the locks' and the channel's names carry it). */
  schema: string;
  runId: string;
  workerId: string;
  /** The run's rate or pause changed, or a pool's key's (a notification on the run's channel, `told` its payload). */
  onTermsChanged: (told: string | undefined) => void;
  /** A series of the run ended near its end (`seriesEndedChannel`): a worker waiting for the queue asks again. */
  onSeriesEnded: () => void;
}

/**
 * The worker's own session, held while this process lives: its liveness lock (others tell a dead worker from a live
 * one by it, `workersAtWork`), the leader's lock when it has it, and the LISTENs for the run's terms and for its
 * series ending near its end. A connection lost
 * (a server restart) takes the locks with it: the next beat opens a new session and takes them again (`hold`).
 */
export class WorkerSession {
  readonly #pool: Pool;
  readonly #workerId: string;
  readonly #livenessLock: string;
  readonly #leaderLock: string;
  readonly #channel: string;
  readonly #onTermsChanged: (told: string | undefined) => void;
  readonly #endedChannel: string;
  readonly #onSeriesEnded: () => void;
  #held: HeldLock | undefined;
  // Whether this worker learns the run's rate now (see `#lead`).
  #leader = false;

  constructor(options: WorkerSessionOptions) {
    this.#pool = options.pool;
    this.#workerId = options.workerId;
    this.#livenessLock = `${workerLockPrefix(options.schema, options.runId)}${options.workerId}`;
    this.#leaderLock = `webdata-etl:leader:${options.schema}:${options.runId}`;
    this.#channel = limitsChannel(options.schema, options.runId);
    this.#onTermsChanged = options.onTermsChanged;
    this.#endedChannel = seriesEndedChannel(options.schema, options.runId);
    this.#onSeriesEnded = options.onSeriesEnded;
  }

  /** Whether this worker holds the leader's lock, and so learns the run's rate now. */
  get leader(): boolean {
    return this.#leader;
  }

  /** Opens the session and takes the leader's lock if it is free; a failure lets go of what was taken. */
  async open(): Promise<void> {
    const held = await this.#connect();
    this.#held = held;
    try {
      this.#leader = await this.#lead(held);
    } catch (error) {
      await held.release();
      throw error;
    }
  }

  /**
   * Checks the session, and opens it again if it went (after a restart); a worker that does not lead tries for the
   * leader's lock again. Done before each beat is written: a fresh beat without the liveness lock would read as a
   * worker whose process ended while the server stayed up (`workerMayBeAlive`).
   */
  async hold(): Promise<void> {
    const held = this.#held;
    if (held) {
      try {
        if (this.#leader) await held.client.query(serverStatements.ping);
        else this.#leader = await this.#lead(held);
        return;
      } catch {
        this.#held = undefined;
        this.#leader = false;
        await held.release();
      }
    }
    this.#held = await this.#connect();
    this.#leader = await this.#lead(this.#held).catch(() => false);
  }

  /** Lets go of the session and its locks (never fails). */
  async release(): Promise<void> {
    await this.#held?.release();
  }

  async #connect(): Promise<HeldLock> {
    const held = await tryAdvisoryLock(this.#pool, this.#livenessLock);
    if (!held) throw new Error(`worker id ${this.#workerId} is taken`);
    const lost = () => {
      if (this.#held !== held) return;
      this.#held = undefined;
      this.#leader = false;
    };
    held.client.on('error', lost);
    held.client.on('end', lost);
    held.client.on('notification', (message) => {
      if (message.channel === this.#channel) this.#onTermsChanged(message.payload);
      if (message.channel === this.#endedChannel) this.#onSeriesEnded();
    });
    try {
      await held.client.query(serverStatements.listen(this.#channel));
      await held.client.query(serverStatements.listen(this.#endedChannel));
    } catch (error) {
      await held.release();
      throw error;
    }
    return held;
  }

  /**
   * The run's rate is learned by one worker at a time (the holder of this lock); the others follow the rate in the
   * shared row, and one of them takes over at its next beat when the leader's session goes.
   */
  async #lead(on: HeldLock): Promise<boolean> {
    return (await on.client.query<{ got: boolean }>(serverStatements.tryAdvisoryLock, [this.#leaderLock])).rows[0]?.got === true;
  }
}
