/**
 * The scheduler's shared types: what it is asked (`Work`), what it answers (`Outcome`), what it tells listeners
 * (`SchedulerEvent`) and the `Scheduler` interface itself. Apart so that the scheduler's parts (stops, throttle,
 * outcome policy) and the scheduler import them from below, and no module of the folder imports back from scheduler.ts.
 */
import type { AllowanceFigures, AllowanceOut } from './allowance-meter.ts';
import type { StopReason } from './classify.ts';
import type { CreditSnapshot } from './credit-meter.ts';
import type { KnownLimit } from './rate-controller.ts';

/** One request of a run: which series it belongs to and which endpoint it calls. */
export interface Work {
  /** Requests of a series run in order; series take turns. */
  series: string;
  /** Endpoint path, for credit weights and 403s. */
  path: string;
  /** Credits of this request; default: the weight configured for `path`. */
  weight?: number;
  /** The page it asks for: told to listeners with each attempt (the `request` event), for spans; unused otherwise. */
  page?: number | undefined;
}

/** Response headers as the client gives them. */
export type ResponseHeaders = Record<string, string | string[] | undefined>;

/** What `send` resolves to: the client's responses fit. */
export interface Answered {
  status?: number;
  headers?: ResponseHeaders;
}

export type Outcome<T> =
  | { ok: true; value: T; attempts: number }
  | { ok: false; kind: 'failed'; error: unknown; attempts: number }
  | { ok: false; kind: 'stopped'; reason: StopReason; error?: unknown; resumeAt?: Date | undefined; attempts: number };

/** Why the run stopped, when it did. */
export interface StopInfo {
  reason: StopReason;
  message: string;
  error?: unknown;
  /** For a quota: when the server said to come back; for allowances, when the first key's next period begins. */
  resumeAt?: Date | undefined;
  /** The keys whose allowances stopped the run (docs/credits.md#allowances): why, and when each opens again. */
  allowance?: readonly AllowanceOut[] | undefined;
}

export type SchedulerEvent =
  | { type: 'request'; series: string; path: string; attempt: number; page?: number | undefined; key?: string }
  | {
      type: 'response';
      series: string;
      path: string;
      attempt: number;
      status: number | string;
      latencyMs: number;
      /** Credits counted for this attempt: its weight when charged (or possibly charged), else 0. */
      credits: number;
      /** Counted as spent without certainty: a timeout or reset after sending, a malformed 2xx. */
      uncertain: boolean;
      /** The label of the key it went with. */
      key?: string;
      /** The allowance's period its credits were held in (docs/credits.md#allowances), when the key has one. */
      period?: string;
      /** The page it asked for (`Work.page`), where told: the spend ledger waits for that page's commit. */
      page?: number | undefined;
    }
  | { type: 'retry'; series: string; path: string; reason: 'rate_limited' | 'transient'; attempt: number; delayMs: number }
  | {
      type: 'pause';
      ms: number;
      reason: 'rate_limited' | 'rate_limit_headers';
      /** Wall-clock end of the pause (ISO 8601), for people reading progress. */
      until: string;
      /** What asked for it: `Retry-After 30 s`, `RateLimit: 0 left, window resets in 40 s`, `backoff after a 429`. */
      cause: string;
      /** In a pool of keys, the key held back (the others go on). */
      key?: string;
    }
  // `leader`: a worker of a distributed run took the run's rate over from the shared row as it became the leader;
  // `recounted`: answers counted again once in lowered it (a failed raise's fall back from the requests sent).
  | { type: 'adapt'; rate: number; concurrency: number; reason: 'rate_limited' | 'sustained_success' | 'recounted' | 'rate_limit_headers' | 'leader'; key?: string }
  | {
      type: 'key_retired';
      key: string;
      /** `allowance`: its allowance's period is spent; it serves again when the next begins. */
      reason: 'unauthorized' | 'payment_required' | 'forbidden' | 'allowance';
      message: string;
      /** The endpoint it is retired for; none: for the run. */
      path?: string | undefined;
      /** Wall-clock time (ISO 8601). */
      at: string;
    }
  | { type: 'stop'; reason: StopReason; message: string; path?: string | undefined };

export interface SchedulerStats {
  requests: { total: number; byStatus: Record<string, number>; inFlight: number };
  /** Attempts sent again: after a 429, or a transient failure. */
  retries: number;
  rateLimited: number;
  /** Time the queue spent paused for 429s and rate-limit windows with no requests remaining. */
  rateLimitedWaitMs: number;
  rate: number;
  /** The server's limit, in requests a second, as learned from its 429s; null until one taught it. */
  learnedLimit: number | null;
  concurrency: number;
  credits: CreditSnapshot;
  /** Each key of the pool: its requests, 429s, credits, the rate it runs at and the limit it learned, and whether it is retired. */
  keys: KeyStats[];
}

export interface KeyStats {
  label: string;
  requests: number;
  rateLimited: number;
  credits: number;
  rate: number;
  learnedLimit: number | null;
  concurrency: number;
  /** Why and when (ISO 8601) it was retired: for the run (`path` null, a 401), or for an endpoint (a 402, a 403). */
  retired: { reason: string; message: string; path: string | null; at: string } | null;
  /** What its throttle knows of the server's limit, for a later run to start from (docs/scheduler.md#a-remembered-start). */
  known: KnownLimit | null;
  /** Its allowance as this process last heard of it (docs/credits.md#allowances); null: none, or none heard of yet. */
  allowance: AllowanceFigures | null;
}

/**
 * Answers other processes got under the same shared pacer since the last time they were told (a distributed run's
 * leader hears the others' through the run's row): how many, when the latest 429 was sent, and when the accepted ones
 * were sent where known (on this process's clock; those not in it were sent about a latency before they were heard).
 */
export interface HeardOutcomes {
  accepted: number;
  rejected: number;
  rejectedSentAt?: number;
  acceptedSentAt?: readonly number[];
}

export interface Scheduler {
  /** Sends one request under the rate, concurrency and budget, retrying as the outcome table says. Never rejects. */
  request<T extends Answered>(work: Work, send: (signal: AbortSignal, key: string) => Promise<T>): Promise<Outcome<T>>;
  /** Stops sending (waiting requests resolve as stopped); requests in flight settle and are kept: they are paid for. */
  stop(reason?: StopReason, message?: string): void;
  /** Stops and cancels requests in flight. */
  abort(): void;
  /** The run-wide stop, once there is one. */
  readonly stopped: StopInfo | undefined;
  /**
   * Whether the budget could still take a request to `path`: false once spent (and possibly-charged) credits alone
   * leave no room for one, whatever requests in flight return. Sources stop starting series then.
   */
  affordable(path: string): boolean;
  /** Whether the budget has turned a request away or been found unable to take one: the run ends as `budget`. */
  readonly budgetReached: boolean;
  /** Endpoints stopped by a 403, with the error. */
  readonly forbidden: ReadonlyMap<string, unknown>;
  /** Resolves once no request is waiting, in flight, or sleeping before a retry. */
  onIdle(): Promise<void>;
  stats(): SchedulerStats;
  /**
   * Answers other processes got under the same shared pacer (a distributed run): the rate learner counts them. In a
   * pool, `key` says whose pacer (each key has its own); none: the first key's.
   */
  heard(outcomes: HeardOutcomes, key?: string): void;
  /** Subscribes to events (progress, logs); returns the unsubscribe function. */
  on(listener: (event: SchedulerEvent) => void): () => void;
}
