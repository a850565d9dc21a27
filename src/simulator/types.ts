/** The simulator's public types: what `startSimulator` resolves to, its stats, its log, and the gate `park` returns. */
import type { RankedResult } from './days.ts';
import type { FaultRule, ResolvedKey } from './options.ts';

export type { RankedResult } from './days.ts';

/** A series as the ground truth takes it: a query, in a country and a language ('' or left out: none). */
export interface SeriesOf {
  q: string;
  country?: string | undefined;
  lang?: string | undefined;
}

export interface LogEntry {
  /** Milliseconds on the simulator's clock when the request arrived. */
  at: number;
  method: string;
  path: string;
  query: string;
  /** Key name, or '' when the request carried no valid credentials. */
  key: string;
  /** Status sent, or 0 when the connection was reset or left hanging. */
  status: number;
  charged: number;
  fault: string | undefined;
}

export interface SimulatorStats {
  requests: number;
  byStatus: Record<string, number>;
  byPath: Record<string, number>;
  /** Credits debited and remaining (`null`: unlimited), by key name. */
  credits: Record<string, { debited: number; remaining: number | null }>;
  faults: Record<string, number>;
  inFlight: number;
  maxInFlight: number;
}

/** Requests held by `Simulator.park` until `release`. */
export interface Gate {
  /** Requests held now. */
  readonly waiting: number;
  /** Requests held so far, released or not. */
  readonly arrived: number;
  /** Resolves once `count` requests have arrived at the gate. */
  reached(count?: number): Promise<void>;
  /** Lets the held requests (and every later one) go on. */
  release(): void;
}

export interface Simulator {
  /** `{base_url}`: `http://127.0.0.1:<port>/api/v1`. */
  readonly url: string;
  readonly port: number;
  /** The key of the first configured key (the generated one when none was configured). */
  readonly apiKey: string | undefined;
  stats(): SimulatorStats;
  log(): readonly LogEntry[];
  resetStats(): void;
  /** Adds a scripted fault rule at run time. */
  inject(rule: FaultRule): void;
  clearRules(): void;
  /** Changes a key's plan mid-run: credits, status, rate, endpoints, quota. */
  updateKey(name: string, patch: Partial<ResolvedKey>): void;
  /**
   * Holds every request that matches (all, by default) unanswered until the gate is released, so that a test can keep
   * a run in flight for exactly as long as it needs, whatever the machine's speed. Held requests are not yet admitted:
   * they take nothing of the rate limit's window and no credit until they go on.
   */
  park(match?: FaultRule['match']): Gate;
  /** The simulated day now, or undefined: no days (the simulator's answers are as they always were). */
  readonly day: number | undefined;
  /** Lives on `day` from now on (0 to 3650): every search answer is that day's ranking. */
  setDay(day: number): void;
  /** Moves to the next day (day 0 when there was none) and returns it: one call per simulated daily run. */
  advanceDay(): number;
  /**
   * The ground truth: the series' whole ranking on `day` (default: the simulator's day), every result with its 1-based
   * rank, URL and domain, exactly as the search endpoint serves it page by page on that day.
   */
  ranking(series: SeriesOf, day?: number): RankedResult[];
  /** The best rank of `domain` (its host, with or without `www.`, any case) in the series on `day`, or null: not there. */
  rankOf(series: SeriesOf, domain: string, day?: number): number | null;
  /** Whether the series' ranking on `day` differs from the day before's. */
  movedOn(series: SeriesOf, day: number): boolean;
  /** The series' daily probability of moving (0.01 to 0.95, most below 0.05): its own rate of change. */
  volatility(series: SeriesOf): number;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
