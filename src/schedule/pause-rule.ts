import { boundHeaderDelay, describeWait } from '../client/retry-after.ts';

/**
 * The one rule for every pause a server's header asks for (`Retry-After` on a 429 or 503, an exhausted
 * `RateLimit`/`X-RateLimit` remaining requests on any status): a short one is slept, a long one stops the run resumably.
 *
 * Headers are the server's word, and a hostile or broken server can say anything: `RateLimit: r=0;t=100000` is a
 * 27-hour pause, `Retry-After: 99999999999999999999` is past the end of JavaScript's dates. So every header-derived
 * duration is first bounded to at most a year (`boundHeaderDelay`, client/retry-after.ts), and then a pause longer
 * than the run's `maxRetryAfterMs` is a quota stop (exit 4, with when to resume) instead of a sleep nobody sees.
 */

export type PauseDecision = { kind: 'sleep'; ms: number } | { kind: 'quota'; ms: number; resumeAt: Date; message: string };

/** What a header's pause becomes: `ms` as asked (bounded), `what` says who asked ("Retry-After 7200 s"). */
export function decidePause(ms: number, maxRetryAfterMs: number, what: string, nowEpochMs: number): PauseDecision {
  const bounded = boundHeaderDelay(ms) ?? 0;
  if (bounded <= maxRetryAfterMs) return { kind: 'sleep', ms: bounded };
  const resumeAt = new Date(nowEpochMs + bounded);
  const wait = describeWait(bounded);
  return {
    kind: 'quota',
    ms: bounded,
    resumeAt,
    message: `the server asked to wait ${wait} (${what}; a quota, not a burst, beyond rateLimit.maxRetryAfterMs ${maxRetryAfterMs} ms): stopped; resume after ${resumeAt.toISOString()}`,
  };
}

