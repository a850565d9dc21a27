import { createHash } from 'node:crypto';
import type { JobAttempt, PgBoss } from 'pg-boss';
import type { Series } from '../pipeline/page.ts';
import type { Pool, PoolClient } from '../postgres/pools.ts';
import { retrying } from '../postgres/failure.ts';
import { systemClock } from '../schedule/clock.ts';
import type { SeriesFeed } from '../sources/source.ts';
import { adapter, type SeriesJobData, seriesJobId } from './boss.ts';
import { queueStatements } from './statements.ts';
import { firstPhase } from '../phase-marks.ts';
import { type Reader, remember, YIELD_EVERY, yieldToTimers } from './plan-window.ts';

/** Hand-backs of a series whose page was refused while its job was held, before that is taken for a fault. */
const REFUSALS = 20;

/**
 * How long a worker with nothing to take waits before asking the queue again (another worker's series may come back),
 * unless woken first: a series that ends while a worker had nothing to take says so on the run's channel
 * (`seriesEndedChannel`), so that the workers waiting for the run's last series leave as soon as it ends.
 */
const POLL_MS = 250;

/**
 * Jobs fetched a statement: a fetch a series cost a transaction a page in a run of one-page series
 * (docs/distributed.md#sizing-a-fleet-and-its-database). Few, so that series still spread over the workers: a worker
 * holds at most one more than it asked for, and hands it back when it leaves.
 */
const FETCHED_AT_ONCE = 2;

/** The channel on which a series that ended near the run's end is told (`SeriesQueue.finish`): short and safe. */
export function seriesEndedChannel(schema: string, runId: string): string {
  return `webdata_ended_${createHash('sha256').update(`${schema}\n${runId}`).digest('hex').slice(0, 24)}`;
}

export interface SeriesQueueOptions {
  boss: PgBoss;
  queue: string;
  pool: Pool;
  /** The state schema, quoted. */
  s: string;
  /** The state schema, as it is named (the channel's name carries it). */
  schema: string;
  runId: string;
  /** Which planning of the run the queue is: its jobs' ids are derived from it (`seriesJobId`). */
  planningNumber: number;
  /** Series in the run's plan: the run is done once that many have ended. */
  seriesTotal: number;
  /** Whether this worker stops taking series (the run stopped, or this worker was told to). */
  stopped: () => boolean;
  /** Aborts a wait for the queue. */
  signal: AbortSignal;
  /** The database's label, without its password, for errors. */
  where: string;
}

/**
 * A worker's side of the run's queue of series jobs: it takes series a few at a time (`FETCHED_AT_ONCE`, so that they
 * spread over the workers), holds their jobs while it pages them, completes a job in the transaction that ends its series, and hands
 * back what it leaves unfinished. The run is over for a worker when every series of the plan has ended, or it stops.
 */
export class SeriesQueue {
  readonly #options: SeriesQueueOptions;
  readonly #sql: ReturnType<typeof queueStatements>;
  readonly #held = new Map<string, JobAttempt>();
  readonly #lapsed = new Set<string>();
  // The sources' plans as this worker reads them, one reader per feed (a combined source has one feed per source), each
  // with a window of the series it read last (`Reader`). Read lazily, as far as the jobs fetched need (`#ownerOf`): a
  // worker never reads the whole plan at its start (a million series read in one synchronous pass before its first
  // request starved its heartbeat), nor keeps what it read past over the run (the series other workers took: the
  // whole plan by a long run's end) where the source can read its plan again (docs/benchmarks.md#planning-at-scale).
  readonly #readers: Reader[] = [];
  readonly #channel: string;
  // The queue had nothing for this worker at its last ask: the run is near its end (or its series are all held).
  #starved = false;
  // Ends the wait between two asks at once (`wake`).
  #wake: (() => void) | undefined;
  // Woken while not waiting (between its ask and its count of ended series): the next wait is skipped.
  #woken = false;

  constructor(options: SeriesQueueOptions) {
    this.#options = options;
    this.#sql = queueStatements(options.s);
    this.#channel = seriesEndedChannel(options.schema, options.runId);
  }

  /** Whether the queue had nothing for this worker at its last ask (it waits for series to come back, or the run to end). */
  get waiting(): boolean {
    return this.#starved;
  }

  /** Asks the queue again now, if this worker waits for it (a series ended, or came back: told on the run's channel). */
  wake(): void {
    if (this.#wake) this.#wake();
    else this.#woken = true;
  }

  /**
   * The feed a source pages from; `all` (the source's own series) says which queued ids are its. The queue is the
   * run's, shared by the sources of a combined source: a job of another source's series waits for that source's
   * feed (held, and beating, meanwhile).
   */
  feed(all: Iterator<Series>, again?: () => Iterator<Series>): SeriesFeed {
    const mine: Series[] = [];
    this.#readers.push({ all, again, feed: mine, read: 0, done: false, window: new Map(), ring: [], at: 0 });
    return {
      next: () => this.#next(mine),
      unused: (one) => {
        void this.handBack(one.id);
      },
    };
  }

  /** Completes the series' job on `client` (the transaction that ends the series); false if it is not ours any more. */
  async finish(seriesId: string, client: PoolClient): Promise<boolean> {
    const job = this.#take(seriesId);
    if (!job) return false;
    const completed = affected(await this.#options.boss.complete(this.#options.queue, job, null, { db: adapter(client) })) > 0;
    // Near the run's end, the workers waiting for its last series hear of this one at its commit, not at their next
    // ask. Only then: a NOTIFY in every series' transaction would serialize their commits on the server's queue lock.
    if (completed && this.#starved) await client.query(this.#sql.notify, [this.#channel]);
    return completed;
  }

  /** A series that was over before this worker took it (ended in an earlier invocation): its job is done. */
  async done(seriesId: string): Promise<void> {
    const job = this.#take(seriesId);
    const { boss, queue } = this.#options;
    if (job && affected(await this.#again(() => boss.complete(queue, job))) > 0) for (const reader of this.#readers) reader.window.delete(seriesId);
  }

  /**
   * A page of the series was refused as taken over by another worker: its job is no longer this worker's. Should
   * the job still be this worker's, another worker it replaced committed that page late (it was frozen, and came
   * back before it heard it had lost the series): the series goes back to the queue and resumes from what is
   * committed. Refused again and again, something else is wrong, and waiting would be forever: it fails loudly.
   */
  async dropped(seriesId: string): Promise<void> {
    const job = this.#take(seriesId);
    if (!job || this.#lapsed.has(seriesId)) return;
    const { boss, queue } = this.#options;
    if (affected(await this.#again(() => boss.touch(queue, job))) === 0) return;
    await this.#again(() => boss.fail(queue, job, { refused: true }));
    if (job.retryCount >= REFUSALS) {
      throw new Error(`the pages of series ${seriesId} were refused ${REFUSALS} times though its job was this worker's: the state store's series row disagrees with the queue`);
    }
  }

  /** Hands a series back to the queue at once (this worker stops), for another worker or the next invocation. */
  async handBack(seriesId: string): Promise<void> {
    const job = this.#take(seriesId);
    const { boss, queue } = this.#options;
    if (job) await this.#again(() => boss.fail(queue, job, { handedBack: true }));
  }

  /** Every job still held goes back: a worker leaving hands over what it did not finish. */
  async handBackAll(): Promise<void> {
    for (const seriesId of [...this.#held.keys()]) await this.handBack(seriesId);
  }

  /**
   * Tells pg-boss this worker is alive, job by job: a job whose attempt lapsed (this worker was frozen or cut off
   * past its heartbeat, and the series went to another) is let go, and its series is `lapsed` from then on.
   */
  async touch(): Promise<void> {
    const { boss, queue } = this.#options;
    const held = [...this.#held];
    if (held.length === 0) return;
    // Every job in one statement (it answers the ids it touched), not one a job: a worker holds as many jobs as its
    // feed reads ahead, and beats every few seconds (docs/distributed.md#sizing-a-fleet-and-its-database).
    const result = await this.#again(() => boss.touch(queue, held.map(([, job]) => job)));
    const touched = settledIds(result);
    for (const [seriesId, job] of held) {
      // A job completed (or handed back) while the statement was on its way is no longer held: nothing to let go.
      if (this.#held.get(seriesId) !== job) continue;
      const kept = touched ? touched.has(job.id) : affected(await this.#again(() => boss.touch(queue, job))) > 0;
      if (!kept) {
        this.#held.delete(seriesId);
        this.#lapsed.add(seriesId);
      }
    }
  }

  /**
   * The run's series by state, for the run's metrics: ended, being paged (a page committed, not ended), and waiting
   * (the rest of the plan: the queue's depth). Asked once, never waited out: a scrape must not hang on an outage.
   */
  async figures(): Promise<{ ended: number; active: number; waiting: number }> {
    const { pool, runId, seriesTotal } = this.#options;
    const { rows } = await pool.query<{ ended: number; active: number }>(this.#sql.seriesByState, [runId]);
    const { ended = 0, active = 0 } = rows[0] ?? {};
    return { ended, active, waiting: Math.max(0, seriesTotal - ended - active) };
  }

  /** Whether the series' job lapsed while this worker held it: another worker has it now. */
  lapsed(seriesId: string): boolean {
    return this.#lapsed.has(seriesId);
  }

  /** The next series of a source's feed (`mine`): one set aside for it, or one taken from the queue, waiting while others may come. */
  async #next(mine: Series[]): Promise<IteratorResult<Series, undefined>> {
    const { boss, queue } = this.#options;
    for (;;) {
      const waiting = mine.shift();
      if (waiting) return { done: false, value: waiting };
      if (this.#options.stopped()) return { done: true, value: undefined };
      this.#woken = false;
      // A few jobs a statement (FETCHED_AT_ONCE): the next series asked for is then one of them, at no round trip.
      const jobs = await this.#again(() => boss.fetch<SeriesJobData>(queue, { batchSize: FETCHED_AT_ONCE }));
      this.#starved = jobs.length === 0;
      if (jobs.length > 0) {
        for (const job of jobs) {
          const owner = await this.#ownerOf(job);
          if (!owner) {
            // Not the run's: sent by something else that uses the queue (a worker with another plan is refused
            // before it joins, so every job of the run is a series of this plan under its planned id). Set aside
            // for good at once, never retried: failed, it would come straight back (the queue retries at once,
            // for hand-backs) and be taken again without end, by every worker in turn.
            await this.#again(() => boss.cancel(queue, { id: job.id, retryCount: job.retryCount }));
            continue;
          }
          this.#held.set(owner.series.id, { id: job.id, retryCount: job.retryCount });
          owner.feed.push(owner.series);
        }
        continue;
      }
      firstPhase('queue-empty');
      if (await this.#ended()) return { done: true, value: undefined };
      try {
        await this.#pause();
      } catch {
        return { done: true, value: undefined };
      }
    }
  }

  /** Waits `POLL_MS`, or until woken (`wake`, or since this ask); rejects once the worker leaves (its signal). */
  async #pause(): Promise<void> {
    const { signal } = this.#options;
    signal.throwIfAborted();
    if (this.#woken) return;
    const woken = new AbortController();
    this.#wake = () => woken.abort();
    try {
      await systemClock.sleep(POLL_MS, AbortSignal.any([signal, woken.signal]));
    } catch (error) {
      // Woken: ask again now. Left: the caller's to end.
      if (signal.aborted) throw error;
    } finally {
      this.#wake = undefined;
    }
  }

  // Outside a page's transaction, every call here is safe to repeat (a job settled twice is fenced by its attempt; a
  // job fetched whose answer was lost lapses back to the queue): a connection that fails is waited out, as the
  // store's statements are.
  #again<T>(work: () => Promise<T>): Promise<T> {
    return retrying(this.#options.where, work, { idempotent: true });
  }

  async #ended(): Promise<boolean> {
    const { pool, runId, seriesTotal } = this.#options;
    const { rows } = await this.#again(() => pool.query<{ n: number }>(this.#sql.seriesEnded, [runId]));
    return (rows[0]?.n ?? 0) >= seriesTotal;
  }

  /**
   * The series a fetched job is for, if the job is the run's own: a series of the plan, under the id planning gave it.
   * The plan is read on only as far as that series: jobs on their first attempt come out of the queue about in the
   * order they were planned, so a worker reads the plan once over the run, a slice at each fetch. A job that comes
   * back (handed back, or lapsed: `retryCount` above 0) comes back at the queue's head, behind what this worker read:
   * its series is looked for in what was read past first (read again from the start), then ahead. Either way round
   * finds it; the order only saves reading.
   */
  async #ownerOf(job: { id: string; data: unknown; retryCount: number }): Promise<Owner | undefined> {
    const series = (job.data as { series?: unknown } | null)?.series;
    if (typeof series !== 'string' || job.id !== seriesJobId(this.#options.runId, series, this.#options.planningNumber)) return undefined;
    const known = this.#known(series);
    if (known) return known;
    if (job.retryCount > 0) return (await this.#readPast(series)) ?? (await this.#readOn(series));
    return (await this.#readOn(series)) ?? (await this.#readPast(series));
  }

  /** The series in a reader's window, if one holds it. */
  #known(seriesId: string): Owner | undefined {
    for (const reader of this.#readers) {
      const series = reader.window.get(seriesId);
      if (series) return { series, feed: reader.feed };
    }
    return undefined;
  }

  /** Reads on, one series of each plan not read to its end in turn, until the series; undefined once every one is. */
  async #readOn(seriesId: string): Promise<Owner | undefined> {
    for (let read = 1; ; read += 1) {
      let any = false;
      for (const reader of this.#readers) {
        if (reader.done) continue;
        const next = reader.all.next();
        if (next.done) {
          reader.done = true;
          continue;
        }
        any = true;
        reader.read += 1;
        remember(reader, next.value);
        if (next.value.id === seriesId) return { series: next.value, feed: reader.feed };
      }
      if (!any) return undefined;
      // A worker that joins late reads far: the heartbeat's timers run meanwhile (another lookup may read on too).
      if (read % YIELD_EVERY === 0) {
        await yieldToTimers();
        const known = this.#known(seriesId);
        if (known) return known;
      }
    }
  }

  /** Looks for the series in what each plan that can be read again was read past, from its start. */
  async #readPast(seriesId: string): Promise<Owner | undefined> {
    for (const reader of this.#readers) {
      if (!reader.again) continue;
      const plan = reader.again();
      for (let read = 1; read <= reader.read; read += 1) {
        const next = plan.next();
        if (next.done) break;
        if (next.value.id === seriesId) {
          remember(reader, next.value);
          return { series: next.value, feed: reader.feed };
        }
        if (read % YIELD_EVERY === 0) await yieldToTimers();
      }
    }
    return undefined;
  }

  #take(seriesId: string): JobAttempt | undefined {
    const job = this.#held.get(seriesId);
    this.#held.delete(seriesId);
    return job;
  }
}

/** A series of the plan, and the feed of the source it belongs to. */
interface Owner {
  series: Series;
  feed: Series[];
}

/** The ids a pg-boss settle or touch says it touched (an array, or PostgreSQL's text of one); undefined if it does not say. */
function settledIds(result: unknown): Set<string> | undefined {
  const settled = (result as { settled?: unknown }).settled;
  if (Array.isArray(settled)) return new Set(settled.map(String));
  if (typeof settled === 'string') return new Set(settled.replace(/^\{|\}$/g, '').split(',').filter(Boolean));
  return undefined;
}

/** How many jobs a pg-boss command changed (`affected`, not in its declared type): 0 when the job's attempt lapsed. */
function affected(result: unknown): number {
  return (result as { affected?: number }).affected ?? 0;
}
