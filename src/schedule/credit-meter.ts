import type { Budget } from './budget.ts';

/**
 * Counts credits so that a budget is never exceeded, at any concurrency: a request's weight is reserved before
 * it is sent, and the reservation is then committed (a 2xx), released (a definite failure: an error status, a
 * connection refused) or counted as uncertain (a timeout or reset after sending, a malformed 2xx: possibly
 * charged, so counted against the budget, and reported apart).
 *
 * The interface (reserve / commit / release / uncertain / whenSettled) is the seam for a shared meter across processes later.
 */
export interface CreditMeter {
  /** Credits of one request to `path`. */
  weightOf(path: string): number;
  /**
   * Takes `weight` from what is left, or returns false (and takes nothing) if that would pass the budget. A meter
   * shared beyond this process answers after a round trip; this one at once.
   */
  reserve(weight: number): boolean | Promise<boolean>;
  /** Whether a request of `weight` could ever be taken: false once spent alone leaves no room for it. */
  couldTake(weight: number): boolean;
  commit(reservation: Charge): void;
  release(reservation: Charge): void;
  uncertain(reservation: Charge): void;
  /**
   * Resolves once a reservation is next committed, released or counted as uncertain (rejects when `signal` aborts):
   * a request that only reservations in flight hold back waits for one of them to settle rather than give up.
   */
  whenSettled(signal: AbortSignal): Promise<void>;
  snapshot(): CreditSnapshot;
}

/** What a reservation is for, so that spend can be reported per endpoint and per series. */
export interface Charge {
  weight: number;
  path: string;
  series: string;
}

export interface CreditSnapshot {
  /** `null`: no budget. */
  budget: number | null;
  /** Counted against the budget: committed plus uncertain, this run and (with `spentBefore`) before a resume. */
  spent: number;
  /** The part of `spent` that may or may not have been charged. */
  uncertain: number;
  /** Held by requests in flight. */
  reserved: number;
  /** Budget minus spent minus reserved (`null`: no budget). */
  remaining: number | null;
  byEndpoint: Record<string, number>;
  bySeries: Record<string, number>;
}

export interface CreditMeterOptions {
  budget?: Budget | null | undefined;
  /** Credits per request by endpoint path; paths not listed weigh `defaultWeight`. */
  weights?: Readonly<Record<string, number>> | undefined;
  defaultWeight?: number | undefined;
  /** Spend of earlier invocations of the same run, so that the budget caps the run across resumes. */
  spentBefore?: number | undefined;
}

export function createCreditMeter(options: CreditMeterOptions = {}): CreditMeter {
  const budget = options.budget?.maxCredits ?? null;
  const weights = options.weights ?? {};
  const defaultWeight = options.defaultWeight ?? 1;
  let spent = options.spentBefore ?? 0;
  let uncertain = 0;
  let reserved = 0;
  const byEndpoint: Record<string, number> = {};
  const bySeries: Record<string, number> = {};

  // Those waiting for a reservation in flight to be committed or returned.
  const settleWaiters = new Set<() => void>();
  const wakeSettleWaiters = () => {
    for (const wake of settleWaiters) wake();
    settleWaiters.clear();
  };

  const countAsSpent = (charge: Charge) => {
    reserved -= charge.weight;
    spent += charge.weight;
    byEndpoint[charge.path] = (byEndpoint[charge.path] ?? 0) + charge.weight;
    bySeries[charge.series] = (bySeries[charge.series] ?? 0) + charge.weight;
  };

  return {
    weightOf: (path) => weights[path] ?? defaultWeight,
    reserve(weight): boolean {
      if (budget !== null && spent + reserved + weight > budget) return false;
      reserved += weight;
      return true;
    },
    couldTake: (weight) => budget === null || spent + weight <= budget,
    commit(charge) {
      countAsSpent(charge);
      wakeSettleWaiters();
    },
    release(charge) {
      reserved -= charge.weight;
      wakeSettleWaiters();
    },
    uncertain(charge) {
      countAsSpent(charge);
      uncertain += charge.weight;
      wakeSettleWaiters();
    },
    whenSettled: (signal) =>
      new Promise<void>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        const wake = () => {
          signal.removeEventListener('abort', abort);
          resolve();
        };
        const abort = () => {
          settleWaiters.delete(wake);
          reject(signal.reason);
        };
        settleWaiters.add(wake);
        signal.addEventListener('abort', abort, { once: true });
      }),
    snapshot: () => ({
      budget,
      spent,
      uncertain,
      reserved,
      remaining: budget === null ? null : budget - spent - reserved,
      byEndpoint: { ...byEndpoint },
      bySeries: { ...bySeries },
    }),
  };
}
