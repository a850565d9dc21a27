import type { Budget } from './budget.ts';

/** A unit of planned work: a series and the most requests it can make (its page cap). */
export interface WorkUnit {
  path: string;
  maxRequests: number;
}

export interface Estimate {
  /** Paid requests in the worst case: every series runs to its page cap. */
  requests: number;
  /** Credits in the worst case. Retries of failures cost nothing (only a 2xx is charged) except ambiguous outcomes. */
  credits: number;
  byEndpoint: Record<string, { series: number; requests: number; credits: number }>;
  /** The budget, and whether the worst case fits in it (`null`: no budget). */
  budget: number | null;
  withinBudget: boolean;
}

export interface EstimateOptions {
  weights?: Readonly<Record<string, number>> | undefined;
  defaultWeight?: number | undefined;
  budget?: Budget | null | undefined;
}

/** Worst-case requests and credits of a plan, before anything is sent. */
export function estimate(units: Iterable<WorkUnit>, options: EstimateOptions = {}): Estimate {
  const weights = options.weights ?? {};
  const defaultWeight = options.defaultWeight ?? 1;
  const byEndpoint: Estimate['byEndpoint'] = {};
  let requests = 0;
  let credits = 0;
  for (const unit of units) {
    const weight = weights[unit.path] ?? defaultWeight;
    const entry = (byEndpoint[unit.path] ??= { series: 0, requests: 0, credits: 0 });
    entry.series += 1;
    entry.requests += unit.maxRequests;
    entry.credits += unit.maxRequests * weight;
    requests += unit.maxRequests;
    credits += unit.maxRequests * weight;
  }
  const budget = options.budget?.maxCredits ?? null;
  return { requests, credits, byEndpoint, budget, withinBudget: budget === null || credits <= budget };
}
