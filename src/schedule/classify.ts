import { WebDataError } from '../errors/web-data-error.ts';

/**
 * Why the scheduler stops sending for the whole run (or, for `forbidden`, for one endpoint; for `budget`, one series);
 * `allowance`: every key's allowance is spent for its period (docs/credits.md#allowances).
 */
export type StopReason = 'budget' | 'allowance' | 'unauthorized' | 'payment_required' | 'forbidden' | 'quota' | 'stall' | 'interrupted' | 'aborted' | 'presumed_dead';

/** What to do about a failed attempt. */
export type Disposition =
  | { action: 'retry' }
  | { action: 'rate_limited'; retryAfterMs: number | undefined }
  | { action: 'fail' }
  | { action: 'stop_run'; reason: 'unauthorized' | 'payment_required' }
  | { action: 'stop_endpoint'; reason: 'forbidden' }
  | { action: 'aborted' };

/**
 * The one table of outcomes (docs/design.md#the-contract-and-what-was-decided):
 *
 * | failure                                   | action                                            |
 * |-------------------------------------------|---------------------------------------------------|
 * | 429                                       | pause everything, slow down, re-queue the request |
 * | 5xx, network error, timeout, malformed 2xx| retry this request with backoff, capped           |
 * | 400, other 3xx/4xx, anything unknown      | the series fails, not retried                     |
 * | 401                                       | the run stops: nothing else can succeed           |
 * | 402                                       | the run stops: credits or billing                 |
 * | 403                                       | every series of that endpoint stops               |
 * | the caller's abort                        | stopped                                           |
 */
export function classify(error: unknown): Disposition {
  if (!(error instanceof WebDataError)) return { action: 'fail' };
  switch (error.kind) {
    case 'rate_limited': {
      const after = (error as WebDataError & { retryAfterMs?: number }).retryAfterMs;
      // Zero, negative or unparseable values carry no information: fall back to our own backoff.
      return { action: 'rate_limited', retryAfterMs: after !== undefined && after > 0 ? after : undefined };
    }
    case 'server':
    case 'network':
    case 'timeout':
    case 'malformed_response':
      return { action: 'retry' };
    case 'authentication':
      return { action: 'stop_run', reason: 'unauthorized' };
    case 'plan':
      return error.status === 403 ? { action: 'stop_endpoint', reason: 'forbidden' } : { action: 'stop_run', reason: 'payment_required' };
    case 'aborted':
      return { action: 'aborted' };
    case 'bad_request':
    case 'unexpected_status':
      return { action: 'fail' };
  }
}

/** Whether an attempt that failed this way may have been charged (counted as spent, reported as uncertain). */
export function mayHaveBeenCharged(error: unknown): boolean {
  return error instanceof WebDataError && error.mayHaveBeenCharged;
}
