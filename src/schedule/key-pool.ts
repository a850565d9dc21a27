import type { Clock } from './clock.ts';
import type { ResolvedSchedulerOptions } from './options.ts';
import { createThrottle, type QueueControls, type Throttle } from './throttle.ts';
import type { KeyStats, SchedulerEvent, SchedulerStats } from './types.ts';

/** One key of a pool as the scheduler is given it: its label, and what of the run's rate it overrides. */
export type KeySpec = NonNullable<ResolvedSchedulerOptions['keys']>[number];

/** Why a key takes no more requests: for the run (a 401), or for one endpoint (a 402, a 403), or its credits' share. */
export interface Retirement {
  reason: 'unauthorized' | 'payment_required' | 'forbidden' | 'budget';
  message: string;
  /** Clock time. */
  at: number;
  /** The endpoint it is retired for; none: for the run. */
  path?: string | undefined;
}

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
  /** Requests of this key sent and not yet answered (what its rate-limit headers' allowance is shared with). */
  sending = 0;
  /** Credits of this key: taken by answers (or possibly charged), and reserved by requests not yet settled. */
  spent = 0;
  reserved = 0;
  readonly counts = { requests: 0, rateLimited: 0 };
  /** Retired for the run (a 401): no request goes to it again. */
  retired: Retirement | undefined;
  /** Retired for these endpoints (a 402, a 403). */
  readonly retiredFor = new Map<string, Retirement>();
  #concurrency: number;

  constructor(spec: KeySpec, config: ResolvedSchedulerOptions, parts: { clock: Clock; emit: (event: SchedulerEvent) => void; halt: AbortSignal; queue?: QueueControls; resized: () => void }) {
    this.label = spec.label;
    this.maxCredits = spec.maxCredits;
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
    this.throttle = createThrottle({ config: own, clock: parts.clock, queue, emit, halt: parts.halt, start: spec.start });
  }

  get concurrency(): number {
    return this.#concurrency;
  }

  /** Whether a request to `path` of `weight` credits may go to this key now or later. */
  serves(path: string, weight: number): boolean {
    if (this.retired || this.retiredFor.has(path)) return false;
    return this.maxCredits === undefined || this.spent + this.reserved + weight <= this.maxCredits;
  }
}

/** What a request waiting for a key gets: a key, or why none of the pool can ever serve it. */
export type Acquired = { lane: KeyLane } | { none: 'retired' | 'budget' };

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

  constructor(specs: readonly KeySpec[], config: ResolvedSchedulerOptions, parts: { clock: Clock; emit: (event: SchedulerEvent) => void; halt: AbortSignal; queue: QueueControls }) {
    this.#queue = parts.queue;
    const alone = specs.length === 1;
    this.lanes = specs.map((spec) => new KeyLane(spec, config, { ...parts, ...(alone ? { queue: parts.queue } : { queue: undefined }), resized: () => this.#resized() }));
    if (!alone) this.#resized();
  }

  /** A key for a request to `path` of `weight` credits, its slot taken and its share reserved; or why there is none. */
  async acquire(path: string, weight: number, signal: AbortSignal): Promise<Acquired> {
    for (;;) {
      signal.throwIfAborted();
      const serving = this.lanes.filter((lane) => lane.serves(path, weight));
      if (serving.length === 0) return { none: this.lanes.some((lane) => !lane.retired && !lane.retiredFor.has(path)) ? 'budget' : 'retired' };
      const free = this.lanes.length === 1 ? serving : serving.filter((lane) => lane.inFlight < lane.concurrency);
      if (free.length === 0) {
        await this.#wake(signal);
        continue;
      }
      const lane = free.reduce((soonest, each) => (each.throttle.nextSlot() < soonest.throttle.nextSlot() ? each : soonest));
      lane.inFlight += 1;
      lane.reserved += weight;
      try {
        await lane.throttle.acquire(signal);
      } catch (error) {
        this.settle(lane, weight, 0);
        throw error;
      }
      // Retired while this request waited for its slot (another request's 401): it goes to another key.
      if (lane.retired || lane.retiredFor.has(path)) {
        this.settle(lane, weight, 0);
        continue;
      }
      return { lane };
    }
  }

  /** A request given `lane` settled: `charged` of its `weight` reserved credits were taken (0: none). */
  settle(lane: KeyLane, weight: number, charged: number): void {
    lane.inFlight -= 1;
    lane.reserved -= weight;
    lane.spent += charged;
    this.#wakeAll();
  }

  /** Retires `lane` (for `path` only, when given); says whether any key still serves `path`. */
  retire(lane: KeyLane, retirement: Retirement): boolean {
    if (retirement.path === undefined) lane.retired ??= retirement;
    else if (!lane.retiredFor.has(retirement.path)) lane.retiredFor.set(retirement.path, retirement);
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
        retired: lane.retired ? { reason: lane.retired.reason, message: lane.retired.message, path: null } : null,
        known: lane.throttle.known ?? null,
      })),
    };
  }

  /** The queue runs as many requests at once as the keys still at work allow between them. */
  #resized(): void {
    if (this.lanes.length > 1) {
      const room = this.lanes.filter((lane) => !lane.retired).reduce((sum, lane) => sum + lane.concurrency, 0);
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
