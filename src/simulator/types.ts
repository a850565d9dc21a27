/** The simulator's public types: what `startSimulator` resolves to, its stats, its log, and the gate `park` returns. */
import type { FaultRule, ResolvedKey } from './options.ts';

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
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
