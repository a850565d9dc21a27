import type { Charge } from './credit-meter.ts';
import type { KeyLane } from './key-pool.ts';
import type { Answered, Outcome, Work } from './types.ts';

/*
 * What the scheduler (scheduler.ts) keeps of a request between its steps: the request across its attempts, and an
 * attempt on its way.
 */

/** A request as the scheduler keeps it across its attempts. */
export interface Task {
  work: Required<Omit<Work, 'page'>>;
  page: number | undefined;
  send: (signal: AbortSignal, key: string) => Promise<Answered>;
  resolve: (outcome: Outcome<Answered>) => void;
  attempts: number;
  rateLimitedAttempts: number;
}

/** An attempt on its way: what its answer or its failure settles. */
export interface Sending {
  charge: Charge;
  /** The key it went with, and the allowance's period its credits were held in (none: the key has no allowance). */
  lane: KeyLane;
  period: string | undefined;
  sentAt: number;
  /** Lets a held virtual clock go on (see `Clock.hold`). */
  release: (() => void) | undefined;
}
