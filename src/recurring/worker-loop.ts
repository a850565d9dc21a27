import type { Clock } from '../schedule/clock.ts';
import { type RunRecords, UNFINISHED } from '../state/interfaces.ts';
import { CLAIM_AHEAD_TOLERANCE_MS, type OccurrenceClaim, type OccurrenceOutcome, type OccurrenceStore } from '../state/occurrence-store.ts';
import { allowanceWait } from './allowance-wait.ts';
import { type Occurrences, occurrencesOf } from './occurrences.ts';
import type { RunTake } from './run-take.ts';
import type { Schedule } from './schedule-config.ts';
import { StoreTime } from './store-time.ts';

/*
 * A worker's loop over one scheduled pipeline (docs/schedules.md, docs/design.md#schedules). Every worker of a fleet
 * computes the same occurrences from the pattern and claims each in the pipeline's state store, keyed by its due
 * time: one claimant per occurrence whatever the number of workers or their clocks' skew. The claimant starts the run
 * (or says why not: skipped, failed); for a distributed pipeline the others join the run it started. Occurrences no
 * worker claimed while due are found when one next looks: missed, and with `missed: 'once'` the latest of them run
 * once, late. How a run is run is given (`Launch`): on the command line, on a thread of its own, as `run` does.
 * Its time is the store's (store-time.ts): a worker whose clock is off neither claims early nor stalls the others.
 */

/** What the loop needs of the pipeline's state store: its occurrences and clock, and which run is the latest. */
export interface ClaimStore extends OccurrenceStore, Pick<RunRecords, 'latestRun'> {}

/** A scheduled pipeline as a worker knows it. */
export interface ScheduledPipeline {
  name: string;
  schedule: Schedule;
  /** Its runs are distributed (state and sinks in one PostgreSQL database): every worker of the fleet joins each. */
  shared: boolean;
}

/** How a launched run went, as far as the loop cares. */
export type LaunchOutcome =
  /** It ran, to any status (`interrupted` when stopped). */
  | { kind: 'ran'; runId: string; status: string }
  /** The pipeline's run is at work elsewhere (its lease held, workers at work): nothing was started. */
  | { kind: 'busy'; message: string }
  /** The run to continue is no longer the pipeline's unfinished run: nothing was done. */
  | { kind: 'ended'; message: string }
  /** It failed: before its run began (no `runId`), or after. */
  | { kind: 'failed'; message: string; runId?: string | undefined };

/** Runs the pipeline as `take` says; `onStart` hears which run it is once it began. Resolves when the run is over. */
export type Launch = (take: RunTake, hooks: { onStart(start: { runId: string; resumed: boolean }): void }) => Promise<LaunchOutcome>;

/** Occurrences one look recorded missed (ISO 8601, oldest first), for the webhooks (docs/notifications.md). */
export interface MissedFound {
  dueAts: string[];
  /** Earlier ones were missed too, not recorded. */
  more: boolean;
  /** The occurrence run once, late, in their stead (`missed: 'once'`); null with `skip`. */
  catchUp: string | null;
}

/** What the loop tells the reader, an occurrence's fate or a run's. */
export interface ScheduleNews {
  pipeline: string;
  dueAt?: string;
  outcome?: OccurrenceOutcome;
  runId?: string;
  message: string;
}

export interface WorkerLoopOptions {
  pipeline: ScheduledPipeline;
  store: ClaimStore;
  launch: Launch;
  /** This worker's name in the claims it makes. */
  worker: string;
  /** No new run is taken once it aborts; the runs at work are stopped by whoever gave `launch` its signals. */
  stop: AbortSignal;
  /** This worker's clock: its timers, and its time once put right by the store's (store-time.ts). */
  clock: Clock;
  say(news: ScheduleNews): void;
  /** Told of the occurrences each look recorded missed (the webhooks whose `on` has `missed`); bounded, never throws. */
  tellMissed?: ((found: MissedFound) => Promise<void>) | undefined;
}

/**
 * An occurrence claimed later than this after its time was not seen when due (the worker was asleep, stalled, or could
 * not reach the store): it counts as missed, as one due while no worker was up. A minute: a timer fires late by
 * milliseconds, a claim waits on a busy database for seconds.
 */
export const LATE_AFTER_MS = 60_000;
/** Occurrences read back at most when a worker looks after a gap: the latest ones, the older ones not recorded. */
export const MOST_DUE_AT_ONCE = 100;
/** Occurrences without a run kept per pipeline (skipped, missed, failed): the older go. */
export const OCCURRENCES_KEPT = 1000;
/** How often a worker that did not claim a distributed pipeline's occurrence looks whether its run has begun. */
export const FOLLOW_POLL_MS = 250;
/** How long at most it looks, if the next occurrence is not due sooner (a claimant that died before its run began). */
export const FOLLOW_FOR_MS = 15 * 60_000;

const iso = (at: number) => new Date(at).toISOString();

/** A worker's loop over one scheduled pipeline: `run()` resolves once `stop` aborted and its runs are over. */
export class WorkerLoop {
  readonly #options: WorkerLoopOptions;
  readonly #occurrences: Occurrences;
  readonly #name: string;
  /** The pipeline's run this worker is at (or about to be at): one at a time. */
  #current: { runId?: string } | undefined;
  readonly #working = new Set<Promise<void>>();
  /** The latest occurrence whose run this worker followed (a distributed pipeline's, claimed by another). */
  #followed = Number.NEGATIVE_INFINITY;
  /** Runs launched and not yet over. */
  #launched = 0;
  /** The time the schedule keeps: the store's. */
  readonly #time: StoreTime;

  constructor(options: WorkerLoopOptions) {
    this.#options = options;
    this.#occurrences = occurrencesOf(options.pipeline.schedule);
    this.#name = options.pipeline.name;
    this.#time = new StoreTime(options.clock, options.store, (message) => this.#say({ message }));
  }

  /** Whether a run this worker launched is at work (a stop then stops it, and it can be resumed). */
  get atWork(): boolean {
    return this.#launched > 0;
  }

  async run(): Promise<void> {
    const { clock, stop } = this.#options;
    const time = this.#time;
    await this.#attempt(() => time.sync());
    // Occurrences due before this worker was up were not its to see: whether another worker saw them, the claims say.
    const watchingSince = time.now();
    await this.#attempt(() => this.#resumeUnfinished());
    while (!stop.aborted) {
      const looked = await this.#attempt(() => this.#look(watchingSince));
      // The store out of reach: the next occurrence all the same; the next look finds what went unclaimed meanwhile.
      const next = looked === undefined ? this.#occurrences.next(time.now()) : looked;
      if (next === null) {
        this.#say({ message: `its schedule "${this.#options.pipeline.schedule.cron}" has no occurrence after ${iso(time.now())}: nothing more to run` });
        break;
      }
      try {
        await clock.sleep(Math.max(0, next - time.now()), stop);
      } catch {
        break;
      }
    }
    // Stopped: what is at work was told by its launcher's signals; it ends (or hands its series back) before this does.
    while (this.#working.size > 0) await Promise.allSettled([...this.#working]);
  }

  /**
   * Claims what came due since the pipeline's latest recorded occurrence (or since this worker is up, for a pipeline
   * with none), and returns when the next one is due (null: never). The latest due is run, or skipped while the
   * pipeline's run is at work; the earlier ones were due with nobody to claim them: missed. All by the store's clock,
   * read first; a claim recorded ahead of it (a worker whose clock ran ahead, before claims were refused) is passed
   * over, not taken for where the schedule stands: `runs` and `status` show it.
   */
  async #look(watchingSince: number): Promise<number | null> {
    await this.#time.sync();
    const now = this.#time.now();
    const [latest] = await this.#options.store.occurrences(this.#name, { limit: 1, dueBy: iso(now + CLAIM_AHEAD_TOLERANCE_MS) });
    const after = latest ? Date.parse(latest.dueAt) : watchingSince - 1;
    const { due, more } = this.#occurrences.dueBetween(after, now, MOST_DUE_AT_ONCE);
    const current = due.at(-1);
    if (current !== undefined) {
      // A claim refused as ahead of the store's clock (read again since): what is due now, by the time put right.
      if ((await this.#due(current, due.slice(0, -1), { now, watchingSince, more, since: latest?.dueAt })) === 'ahead') return this.#occurrences.next(this.#time.now());
    }
    // Another worker claimed the latest before this one looked: a distributed pipeline's run is joined all the same.
    else if (latest && this.#options.pipeline.shared && !this.#current) {
      const fresh = after > this.#followed && after >= watchingSince && now - after <= LATE_AFTER_MS;
      if (fresh) this.#follow(after);
    }
    // A claim of another worker's may lie ahead of this clock (its clock is ahead): the next is after both.
    return this.#occurrences.next(Math.max(now, current ?? after));
  }

  /**
   * The occurrences due since the last look: the latest run (or skipped, or missed with `missed: 'skip'`), the earlier
   * ones missed; those this worker recorded missed are told to the webhooks (`tellMissed`). `ahead` when a claim was
   * refused as ahead of the store's clock.
   */
  async #due(current: number, earlier: number[], at: { now: number; watchingSince: number; more: boolean; since: string | undefined }): Promise<'ahead' | undefined> {
    const missedNote = 'due while no worker was up to claim it';
    // On time: due while this worker was up, and claimed soon after (not after a sleep of the machine, say).
    const onTime = current >= at.watchingSince && at.now - current <= LATE_AFTER_MS;
    const skip = this.#options.pipeline.schedule.missed === 'skip';
    const missed: number[] = [];
    try {
      for (const [index, dueAt] of earlier.entries()) {
        const note = index === 0 && at.more ? `${missedNote} (and earlier ones since ${at.since ?? 'before'}, not recorded)` : missedNote;
        const claimed = await this.#claim(dueAt, 'missed', note);
        // The later ones are further ahead: none is claimed.
        if (claimed === 'ahead') return 'ahead';
        if (claimed === 'won') missed.push(dueAt);
      }
      if (onTime) return await this.#take(current, null);
      if (skip) {
        const claimed = await this.#claim(current, 'missed', `${missedNote}; missed: skip`);
        if (claimed === 'won') missed.push(current);
        return claimed === 'ahead' ? 'ahead' : undefined;
      }
      const count = earlier.length + 1;
      return await this.#take(current, `catch-up: ${count === 1 ? 'it was' : `${count}${at.more ? '+' : ''} occurrences were`} due while no worker was up (missed: once)`);
    } finally {
      if (missed.length > 0) this.#tellMissed({ dueAts: missed.map(iso), more: at.more && missed[0] === earlier[0], catchUp: onTime || skip ? null : iso(current) });
    }
  }

  /** Occurrences this worker recorded missed, told to the webhooks; a stop waits for the telling (bounded), as for runs. */
  #tellMissed(found: MissedFound): void {
    const telling = this.#options.tellMissed?.(found);
    if (telling) this.#track(telling.catch(() => undefined));
  }

  /**
   * An occurrence to run: skipped while the pipeline's run is at work; else claimed, started, or followed. `ahead`
   * when its claim was refused as ahead of the store's clock.
   */
  async #take(dueAt: number, note: string | null): Promise<'ahead' | undefined> {
    const atWork = await this.#runAtWork();
    // A run stopped by its keys' allowances waits for their periods to open: an occurrence before sends nothing.
    const skip = atWork === undefined ? allowanceWait(await this.#options.store.latestRun(this.#name), dueAt) : `${atWork} was still at work`;
    const claimed = await this.#claim(dueAt, skip === undefined ? 'claimed' : 'skipped', skip ?? note);
    if (claimed === 'ahead') return 'ahead';
    if (skip !== undefined) return undefined;
    if (claimed === 'won') this.#start(dueAt, note);
    else if (this.#options.pipeline.shared) this.#follow(dueAt);
    return undefined;
  }

  /**
   * The run this worker is at, named, if it is really at work; undefined when it is at none, or at one whose record
   * says it ended (its launch winding down: a slow join of the ended run, webhooks being told), which skips nothing.
   * A launch whose run has not begun yet (or a run awaited from another worker) is at work.
   */
  async #runAtWork(): Promise<string | undefined> {
    const current = this.#current;
    if (!current) return undefined;
    if (current.runId === undefined) return 'its run';
    const latest = await this.#options.store.latestRun(this.#name);
    if (latest?.status === 'running') return `run ${latest.runId}`;
    return undefined;
  }

  /** The claimant's run: a new one, or the pipeline's unfinished one resumed; never a second start of one at work. */
  #start(at: number, note: string | null): void {
    const dueAt = iso(at);
    const store = this.#options.store;
    let settled: Promise<void> = Promise.resolve();
    this.#work({ kind: 'start' }, {
      onStart: ({ runId, resumed }) => {
        const outcome = resumed ? 'resumed' : 'started';
        settled = this.#attempt(async () => {
          const resumedNote = `run ${runId} was unfinished: resumed`;
          await store.settleOccurrence(this.#name, dueAt, { outcome, runId, ...(resumed ? { note: note ? `${note}; ${resumedNote}` : resumedNote } : {}) });
          this.#say({ dueAt, outcome, runId, message: resumed ? `run ${runId}, unfinished, taken up again` : `run ${runId}` });
        }).then(() => undefined);
      },
      onEnd: async (outcome) => {
        await settled;
        if (outcome.kind === 'busy') await this.#settle(dueAt, 'skipped', `the pipeline's run was still at work: ${outcome.message}`);
        else if (outcome.kind === 'failed' && outcome.runId === undefined) await this.#settle(dueAt, 'failed', outcome.message);
      },
    });
  }

  /**
   * Another worker claimed a distributed pipeline's occurrence: this one joins the run it starts, once it has begun,
   * and never starts one (`continue`): the run may have ended by then.
   */
  #follow(at: number): void {
    const { store, stop, clock } = this.#options;
    const time = this.#time;
    this.#followed = at;
    const dueAt = iso(at);
    const until = Math.min(this.#occurrences.next(at) ?? Number.POSITIVE_INFINITY, at + FOLLOW_FOR_MS);
    this.#current = {};
    const following = (async () => {
      while (!stop.aborted && time.now() < until) {
        const [row] = await store.occurrences(this.#name, { dueAt });
        if (row?.runId && (row.outcome === 'started' || row.outcome === 'resumed')) return row.runId;
        if (row && row.outcome !== 'claimed') return undefined;
        await clock.sleep(FOLLOW_POLL_MS, stop);
      }
      return undefined;
    })();
    const done = following
      .catch(() => undefined)
      .then((runId) => {
        this.#current = undefined;
        if (runId !== undefined && !stop.aborted) this.#work({ kind: 'continue', runId }, {});
      });
    this.#track(done);
  }

  /** At start: the pipeline's unfinished run, if an occurrence started it, is resumed (or joined), not run anew. */
  async #resumeUnfinished(): Promise<void> {
    const { store } = this.#options;
    const latest = await store.latestRun(this.#name);
    if (!latest || !UNFINISHED.has(latest.status)) return;
    const [occurrence] = await store.occurrences(this.#name, { runId: latest.runId });
    // A run started by hand is left to its command (or to the next occurrence, which resumes it); one stopped by its
    // keys' allowances, to the next occurrence (its period spent, or its share of its own).
    if (!occurrence || latest.status === 'allowance') return;
    this.#say({ dueAt: occurrence.dueAt, runId: latest.runId, message: `run ${latest.runId} is unfinished (${latest.status}): taking it up again` });
    this.#work({ kind: 'continue', runId: latest.runId }, {});
  }

  /** Launches a run as this worker's current one, and says how it went. */
  #work(take: RunTake, hooks: { onStart?: (start: { runId: string; resumed: boolean }) => void; onEnd?: (outcome: LaunchOutcome) => Promise<void> }): void {
    const current: { runId?: string } = take.kind === 'continue' ? { runId: take.runId } : {};
    this.#current = current;
    this.#launched += 1;
    const launched = this.#options
      .launch(take, {
        onStart: (start) => {
          current.runId = start.runId;
          hooks.onStart?.(start);
        },
      })
      .catch((error: unknown): LaunchOutcome => ({ kind: 'failed', message: error instanceof Error ? error.message : String(error), runId: current.runId }));
    const done = launched.then(async (outcome) => {
      this.#launched -= 1;
      if (this.#current === current) this.#current = undefined;
      await this.#attempt(async () => hooks.onEnd?.(outcome));
      this.#say(this.#ended(outcome));
    });
    this.#track(done);
  }

  #ended(outcome: LaunchOutcome): Omit<ScheduleNews, 'pipeline'> {
    switch (outcome.kind) {
      case 'ran':
        if (outcome.status === 'allowance') return { runId: outcome.runId, message: `run ${outcome.runId} ended allowance: the next occurrence with credits to spend takes it up again` };
        return {
          runId: outcome.runId,
          message: UNFINISHED.has(outcome.status) ? `run ${outcome.runId} ended ${outcome.status}: it is taken up again at the next start or occurrence` : `run ${outcome.runId} ended: ${outcome.status}`,
        };
      case 'failed':
        return { ...(outcome.runId ? { runId: outcome.runId } : {}), message: `${outcome.runId ? `run ${outcome.runId}` : 'the run'} failed: ${outcome.message}` };
      default:
        return { message: outcome.message };
    }
  }

  #track(work: Promise<void>): void {
    this.#working.add(work);
    void work.finally(() => this.#working.delete(work));
  }

  /** Claims an occurrence with its outcome; says so when this worker's claim took, or was refused as ahead. */
  async #claim(at: number, outcome: OccurrenceOutcome, note: string | null): Promise<OccurrenceClaim['result']> {
    const { store, worker } = this.#options;
    const dueAt = iso(at);
    const claim = await store.claimOccurrence({ pipeline: this.#name, dueAt, outcome, worker, note }).catch(async (error: unknown) => {
      // An answer lost on its way back may hide a claim that took: the row says whose it is (a worker's name is its own).
      const [row] = await store.occurrences(this.#name, { dueAt }).catch(() => []);
      if (row === undefined) throw error;
      return { result: row.worker === worker ? 'won' : 'taken' } as const;
    });
    if (claim.result === 'ahead') {
      // The store's clock moved back under this worker since it was read: its time is put right for the next look.
      const late = ((at - claim.storeTime) / 1000).toFixed(1);
      this.#say({ dueAt, message: `not claimed: due ${late} s after the state store's clock (${iso(claim.storeTime)}); this worker's time was ahead` });
      this.#time.heard(claim.storeTime);
      return 'ahead';
    }
    if (claim.result === 'won' && outcome !== 'claimed') {
      this.#say({ dueAt, outcome, message: note ?? outcome });
      await store.pruneOccurrences(this.#name, OCCURRENCES_KEPT);
    }
    return claim.result;
  }

  async #settle(dueAt: string, outcome: OccurrenceOutcome, note: string): Promise<void> {
    await this.#options.store.settleOccurrence(this.#name, dueAt, { outcome, note });
    this.#say({ dueAt, outcome, message: note });
  }

  #say(news: Omit<ScheduleNews, 'pipeline'>): void {
    this.#options.say({ pipeline: this.#name, ...news });
  }

  /** A failure of the store is said, and the loop goes on: the next look finds what it could not claim. */
  async #attempt<T>(work: () => Promise<T>): Promise<T | undefined> {
    try {
      return await work();
    } catch (error) {
      this.#say({ message: `could not reach its state store: ${error instanceof Error ? error.message : String(error)}` });
      return undefined;
    }
  }
}
