import type { AllowanceMeter, AllowanceOut } from './allowance-meter.ts';
import { type Clock, epochOf } from './clock.ts';
import type { FleetKey, Retirement } from './fleet-key.ts';
import type { ResolvedSchedulerOptions } from './options.ts';
import type { Stops } from './stops.ts';
import { createThrottle, type QueueControls, type Throttle } from './throttle.ts';
import type { KeyStats, SchedulerEvent, SchedulerStats } from './types.ts';

/** One key of a pool as the scheduler is given it: its label, and what of the run's rate it overrides. */
export type KeySpec = NonNullable<ResolvedSchedulerOptions['keys']>[number];

export type { Retirement } from './fleet-key.ts';

/**
 * One key of the run (docs/scheduler.md#a-pool-of-keys): its own throttle — pacer, rate controller, pauses, learned
 * from its own answers — its requests in flight against its own concurrency, the credits it took against its own
 * share (`maxCredits`), its health, and its counts.
 */
export class KeyLane {
  readonly label: string;
  readonly throttle: Throttle;
  readonly maxCredits: number | undefined;
  /** Requests given this key and not yet settled: waiting for its slot, or in flight. */
  inFlight = 0;
  /** Requests of this key sent and not yet answered (what its rate-limit window's remaining requests are shared with). */
  sending = 0;
  /** Credits of this key: taken by answers (or possibly charged), and reserved by requests not yet settled. */
  spent = 0;
  reserved = 0;
  readonly counts = { requests: 0, rateLimited: 0 };
  /** Retired for the run (a 401): no request goes to it again. */
  retired: Retirement | undefined;
  /** Retired for these endpoints (a 402, a 403). */
  readonly retiredFor = new Map<string, Retirement>();
  /** In a pool shared with other processes (a distributed run): the key's share and retirements as they all see them. */
  readonly fleet: FleetKey | undefined;
  /** Its share of the credits across those processes is spent: no request goes to it again. */
  shareSpent = false;
  /** Its allowance (docs/credits.md#allowances): while its period is spent, no request goes to it. */
  readonly allowance: AllowanceMeter | undefined;
  /** The period whose spent allowance was last told (once, whatever the number of requests that found it spent). */
  outTold: string | undefined;
  #concurrency: number;

  constructor(spec: KeySpec, config: ResolvedSchedulerOptions, parts: { clock: Clock; emit: (event: SchedulerEvent) => void; halt: AbortSignal; queue?: QueueControls; resized: () => void }) {
    this.label = spec.label;
    this.maxCredits = spec.maxCredits;
    this.allowance = spec.allowance;
    this.#concurrency = spec.concurrency ?? config.concurrency;
    const own = { ...config, rate: spec.rate ?? config.rate, concurrency: this.#concurrency };
    // One key alone drives the run's queue itself, as before pools: pauses hold every request back. In a pool a key's
    // pause holds back only its own slots (its pacer), and its concurrency is its own share of the queue's.
    const lane = this;
    const queue: QueueControls = parts.queue ?? {
      get concurrency() {
        return lane.#concurrency;
      },
      set concurrency(next: number) {
        lane.#concurrency = next;
        parts.resized();
      },
      pause: () => undefined,
      start: () => parts.resized(),
    };
    // In a pool, a key's adapting and pauses say which key (one key alone: as before pools).
    const pooled = parts.queue === undefined;
    const emit = (event: SchedulerEvent) => parts.emit(pooled && (event.type === 'adapt' || event.type === 'pause') ? { ...event, key: this.label } : event);
    // A pool's key paces on its own shared row when the run shares its limits (one key alone: the run's row, as before).
    this.fleet = pooled ? config.fleet?.(spec.label, spec.maxCredits) : undefined;
    this.throttle = createThrottle({ config: own, clock: parts.clock, queue, emit, halt: parts.halt, key: pooled ? spec.label : undefined, start: spec.start, slowStart: pooled && config.learns === undefined });
  }

  get concurrency(): number {
    return this.#concurrency;
  }

  /** Whether a request to `path` of `weight` credits may go to this key now or later. */
  serves(path: string, weight: number): boolean {
    if (this.retired || this.retiredFor.has(path) || this.shareSpent || this.allowance?.out) return false;
    return this.maxCredits === undefined || this.spent + this.reserved + weight <= this.maxCredits;
  }
}

/** The run's stops, for when other processes retired the last keys serving a request (see `KeyPool.acquire`). */
type PoolStops = Pick<Stops, 'run' | 'forbidden' | 'stopRun' | 'forbid'>;

/**
 * What a request waiting for a key gets: a key (and, when it has an allowance, the period its credits were held in), or
 * why none of the pool can serve it: retired, shares spent, or allowances spent until their periods end (`out`).
 */
export type Acquired = { lane: KeyLane; period: string | undefined } | { none: 'retired' | 'budget' } | { none: 'allowance'; out: readonly AllowanceOut[] };

/**
 * The run's keys, and the choice of one for each request: the key whose next free slot comes soonest among those with
 * room in their concurrency — work-conserving, so that the pool's throughput is the sum of its keys' limits, and a
 * 429 slows only the key it came on. One key alone is the run as it was before pools: the same throttle on the same
 * queue, its slot taken as it always was.
 */
export class KeyPool {
  readonly lanes: readonly KeyLane[];
  readonly #queue: QueueControls;
  readonly #waiting = new Set<() => void>();
  readonly #clock: Clock;
  readonly #emit: (event: SchedulerEvent) => void;
  readonly #stops: PoolStops | undefined;

  constructor(specs: readonly KeySpec[], config: ResolvedSchedulerOptions, parts: { clock: Clock; emit: (event: SchedulerEvent) => void; halt: AbortSignal; queue: QueueControls; stops?: PoolStops }) {
    this.#queue = parts.queue;
    this.#clock = parts.clock;
    this.#emit = parts.emit;
    this.#stops = parts.stops;
    const alone = specs.length === 1;
    this.lanes = specs.map((spec) => new KeyLane(spec, config, { ...parts, ...(alone ? { queue: parts.queue } : { queue: undefined }), resized: () => this.#resized() }));
    if (!alone) this.#resized();
  }

  /** A key for a request to `path` of `weight` credits, its slot taken and its share reserved; or why there is none. */
  async acquire(path: string, weight: number, signal: AbortSignal): Promise<Acquired> {
    for (;;) {
      signal.throwIfAborted();
      this.#hearFleet();
      const serving = this.lanes.filter((lane) => lane.serves(path, weight));
      if (serving.length === 0) return this.#none(path);
      const lane = this.lanes.length === 1 ? serving[0] : this.#choose(serving);
      if (lane === undefined) {
        await this.#wake(signal);
        continue;
      }
      lane.inFlight += 1;
      lane.reserved += weight;
      try {
        await lane.throttle.acquire(signal);
        // Its next slot moved on: a request waiting for a key may go to it now, or to another that would idle.
        this.#wakeAll();
        // A shared pacer's slot read what other processes told of the key: it may be retired now.
        this.#hearFleet();
        // Retired while this request waited for its slot (another request's 401): it goes to another key.
        if (lane.retired || lane.retiredFor.has(path)) {
          this.#letGo(lane, weight);
          continue;
        }
        // The key's share across every process of a distributed run, reserved where they all see it.
        if (lane.fleet && !(await lane.fleet.reserve(weight))) {
          lane.shareSpent = true;
          this.#letGo(lane, weight);
          continue;
        }
      } catch (error) {
        this.#letGo(lane, weight);
        throw error;
      }
      if (!lane.allowance) return { lane, period: undefined };
      const held = await this.#allowanceOf(lane, weight, signal);
      if (held !== undefined) return { lane, period: held };
    }
  }

  /**
   * The key's allowance holds the request's credits (the period they are held in), or the key is given back: to wait
   * for a request of its own in flight to settle (it may give credits back), or out until its period ends.
   */
  async #allowanceOf(lane: KeyLane, weight: number, signal: AbortSignal): Promise<string | undefined> {
    let verdict;
    try {
      verdict = await (lane.allowance as AllowanceMeter).take(weight);
    } catch (error) {
      this.#letGo(lane, weight);
      throw error;
    }
    if (verdict.taken) return verdict.period;
    // Its slot and share go back; the request looks again (another key, or this one once a request settles).
    this.#letGo(lane, weight);
    if ('wait' in verdict) await abortable(verdict.wait, signal);
    else if (this.lanes.length > 1 && lane.outTold !== verdict.out.period) {
      const { out } = verdict;
      lane.outTold = out.period;
      this.#emit({ type: 'key_retired', key: lane.label, reason: 'allowance', message: out.message, at: new Date(out.at).toISOString() });
      this.#resized();
    }
    return undefined;
  }

  /**
   * The key a request goes to, or none yet (it waits for a key to free a place): the key whose next free slot comes
   * soonest, counting those whose concurrency is full — a full key is waited for, its requests in flight wake the
   * waiting when they settle — unless another key with room would otherwise leave its own next slot unused (its slot
   * within one of its intervals: nothing waits for it). Given to the soonest key with room instead, a slow key took as
   * many requests as its concurrency, each an interval after the last: at the end of the work the others were done and
   * it sent alone for seconds (the 2 r/s key of a pool at 8, 4 and 2 held 4 requests 2 s out; a run 27.7 s long where
   * 26.2 would do, in virtual time).
   */
  #choose(serving: readonly KeyLane[]): KeyLane | undefined {
    const read = new Map(serving.map((lane) => [lane, lane.throttle.nextSlot()]));
    // Read after the slots: a key with nothing waiting is free now, and keys free now are as soon as each other (the
    // one with fewer requests goes first: unpaced keys share the work).
    const now = this.#clock.now();
    const slot = (lane: KeyLane) => Math.max(now, read.get(lane) as number);
    const sooner = (a: KeyLane, b: KeyLane) => slot(a) < slot(b) || (slot(a) === slot(b) && a.inFlight < b.inFlight);
    const soonest = serving.reduce((best, each) => (sooner(each, best) ? each : best));
    if (soonest.inFlight < soonest.concurrency) return soonest;
    const idle = serving.filter((lane) => lane.inFlight < lane.concurrency && slot(lane) <= now + intervalOf(lane.throttle.rate));
    return idle.reduce<KeyLane | undefined>((best, each) => (best === undefined || sooner(each, best) ? each : best), undefined);
  }

  /**
   * A request given `lane` settled: `charged` of its `weight` reserved credits were taken (0: none); `period`, the
   * allowance's period its credits were held in (none: not taken from an allowance).
   */
  settle(lane: KeyLane, weight: number, charged: number, period?: string): void {
    lane.fleet?.settle(weight, charged);
    if (period !== undefined) lane.allowance?.settle(period, weight, charged > 0);
    lane.spent += charged;
    this.#letGo(lane, weight);
  }

  /** Retires `lane` (for `path` only, when given); says whether any key still serves `path`. */
  retire(lane: KeyLane, retirement: Retirement): boolean {
    const known = retirement.path === undefined ? lane.retired : lane.retiredFor.get(retirement.path);
    if (retirement.path === undefined) lane.retired ??= retirement;
    else if (!lane.retiredFor.has(retirement.path)) lane.retiredFor.set(retirement.path, retirement);
    // Told to the other processes of a distributed run, which then send nothing more with it.
    if (!known && retirement.reason !== 'budget') lane.fleet?.retire(retirement);
    this.#resized();
    return this.lanes.some((each) => !each.retired && (retirement.path === undefined || !each.retiredFor.has(retirement.path)));
  }

  /**
   * The pool's figures for the scheduler's stats: its keys' rates and learned limits add up (one key: its own, as
   * before pools), the longest any key was paused, and each key's own.
   */
  figures(): Pick<SchedulerStats, 'rateLimitedWaitMs' | 'rate' | 'learnedLimit' | 'keys'> {
    const learned = this.lanes.map((lane) => lane.throttle.learnedLimit).filter((limit): limit is number => limit !== undefined);
    return {
      rateLimitedWaitMs: Math.max(...this.lanes.map((lane) => lane.throttle.pausedMs)),
      rate: this.lanes.reduce((sum, lane) => sum + (lane.retired ? 0 : lane.throttle.rate), 0),
      learnedLimit: learned.length === 0 ? null : learned.reduce((sum, limit) => sum + limit, 0),
      keys: this.lanes.map((lane): KeyStats => ({
        label: lane.label,
        requests: lane.counts.requests,
        rateLimited: lane.counts.rateLimited,
        credits: lane.spent,
        rate: lane.throttle.rate,
        learnedLimit: lane.throttle.learnedLimit ?? null,
        concurrency: lane.concurrency,
        retired: this.#retiredOf(lane),
        known: lane.throttle.known ?? null,
        allowance: lane.allowance?.figures ?? null,
      })),
    };
  }

  /**
   * Why and when a key was retired, said in wall-clock time: for the run, else for the first endpoint it was retired
   * for (a key refused on two endpoints says the first; its events say each).
   */
  #retiredOf(lane: KeyLane): KeyStats['retired'] {
    const retirement = lane.retired ?? [...lane.retiredFor.values()].sort((a, b) => a.at - b.at)[0];
    const out = retirement ? undefined : lane.allowance?.out;
    // Out of its allowance until its period ends: said as a retirement for that long (it serves again after).
    if (out) return { reason: 'allowance', message: out.message, path: null, at: new Date(out.at).toISOString() };
    if (!retirement) return null;
    const at = new Date(epochOf(this.#clock) - (this.#clock.now() - retirement.at)).toISOString();
    return { reason: retirement.reason, message: retirement.message, path: retirement.path ?? null, at };
  }

  /** A request taken by `lane` and not sent: its slot in the key's concurrency and its local share go back. */
  #letGo(lane: KeyLane, weight: number): void {
    lane.inFlight -= 1;
    lane.reserved -= weight;
    this.#wakeAll();
  }

  /** No key serves `path`: their shares are spent, or each is retired (by this process, which then stopped, or others). */
  #none(path: string): Acquired {
    const unretired = this.lanes.filter((lane) => !lane.retired && !lane.retiredFor.has(path));
    // Keys out of their allowances serve again in their next periods: the run stops until then, as `allowance`.
    const out = unretired.map((lane) => lane.allowance?.out).filter((each): each is AllowanceOut => each !== undefined);
    if (out.length > 0) return { none: 'allowance', out };
    if (unretired.length > 0) return { none: 'budget' };
    // The last keys were retired by other processes: this one stops as one key's own answer would have stopped it.
    const stops = this.#stops;
    // The latest retirement decides, as the last key's own refusal decides in one process.
    const last = this.lanes
      .map((lane) => lane.retired ?? lane.retiredFor.get(path))
      .reduce<Retirement | undefined>((latest, each) => (each && (!latest || each.at >= latest.at) ? each : latest), undefined);
    if (stops && !stops.run && !stops.forbidden.has(path) && last) {
      if (last.reason === 'forbidden') stops.forbid(path, undefined, last.message);
      else stops.stopRun({ reason: last.reason === 'unauthorized' ? 'unauthorized' : 'payment_required', message: last.message });
    }
    return { none: 'retired' };
  }

  /** Takes in the retirements other processes told of each key (a distributed run), as if this one had met them. */
  #hearFleet(): void {
    let changed = false;
    for (const lane of this.lanes) {
      for (const heard of lane.fleet?.heard() ?? []) {
        if (heard.path === undefined ? lane.retired : lane.retiredFor.has(heard.path)) continue;
        const retirement = { ...heard, at: this.#clock.now() };
        if (heard.path === undefined) lane.retired = retirement;
        else lane.retiredFor.set(heard.path, retirement);
        changed = true;
        if (heard.reason !== 'budget') {
          this.#emit({ type: 'key_retired', key: lane.label, reason: heard.reason, message: `another worker: ${heard.message}`, path: heard.path, at: new Date(epochOf(this.#clock)).toISOString() });
        }
      }
    }
    if (changed) this.#resized();
  }

  /** The queue runs as many requests at once as the keys still at work allow between them. */
  #resized(): void {
    if (this.lanes.length > 1) {
      const room = this.lanes.filter((lane) => !lane.retired && !lane.allowance?.out).reduce((sum, lane) => sum + lane.concurrency, 0);
      this.#queue.concurrency = Math.max(1, room);
    }
    this.#wakeAll();
  }

  #wake(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.#waiting.delete(done);
        signal.removeEventListener('abort', aborted);
        resolve();
      };
      const aborted = () => {
        this.#waiting.delete(done);
        reject(signal.reason);
      };
      this.#waiting.add(done);
      signal.addEventListener('abort', aborted, { once: true });
    });
  }

  #wakeAll(): void {
    for (const wake of [...this.#waiting]) wake();
  }
}

/** `promise`, or the signal's reason once it aborts first. */
function abortable(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  return new Promise<void>((resolve, reject) => {
    const aborted = () => reject(signal.reason);
    signal.addEventListener('abort', aborted, { once: true });
    promise.then(() => {
      signal.removeEventListener('abort', aborted);
      resolve();
    }, reject);
  });
}

/** Milliseconds between two slots at `rate` requests a second (none without a rate). */
function intervalOf(rate: number): number {
  return Number.isFinite(rate) && rate > 0 ? 1000 / rate : 0;
}
