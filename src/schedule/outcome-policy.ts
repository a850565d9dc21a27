import { describeWait } from '../client/retry-after.ts';
import { fullJitter } from './backoff.ts';
import type { Disposition } from './classify.ts';
import type { ResolvedSchedulerOptions } from './options.ts';
import { decidePause } from './pause-rule.ts';
import type { StopInfo } from './types.ts';

/**
 * What the scheduler does after a failed attempt: the outcome table of `classify` (which row a failure is) applied
 * to the request's and the run's counters and the configuration. The scheduler carries the step out; nothing here
 * keeps state, sleeps or sends.
 */
export type Step =
  /** The request fails with its error: its series fails. */
  | { do: 'fail' }
  /** A transient failure: send this request again after `delayMs`. */
  | { do: 'retry'; delayMs: number }
  /** A 429: slow down, pause every request for `pauseMs` (none when 0), then send this one again first. */
  | { do: 'back_off'; pauseMs: number; cause: string }
  /** Nothing else can succeed: the run stops. */
  | { do: 'stop_run'; stop: StopInfo }
  /** A 403: every request to this endpoint stops, the others go on. */
  | { do: 'forbid'; message: string }
  /** The caller's abort. */
  | { do: 'aborted' };

/** What the step depends on besides the failure's class. */
export interface Counts {
  error: unknown;
  path: string;
  /** Attempts of this request, the failed one included. */
  attempts: number;
  /** 429s of this request, this one included. */
  rateLimitedAttempts: number;
  /** 429s in a row across the run before this one (a success resets them). */
  consecutiveRateLimits: number;
  /** Nothing has succeeded for longer than `rateLimit.stallAfterMs`. */
  stalled: boolean;
  /** Wall-clock time, for when a quota ends. */
  nowEpochMs: number;
}

type Policy = Pick<ResolvedSchedulerOptions, 'retry' | 'rateLimit'>;

export function nextStep(disposition: Disposition, counts: Counts, config: Policy, random: () => number): Step {
  const { error } = counts;
  const { rateLimit } = config;
  switch (disposition.action) {
    case 'rate_limited': {
      const retryAfter = disposition.retryAfterMs;
      // A Retry-After is the server's word: the pause rule decides whether it is slept or a quota.
      const asked = retryAfter === undefined ? undefined : decidePause(retryAfter, rateLimit.maxRetryAfterMs, `Retry-After ${describeWait(retryAfter)}`, counts.nowEpochMs);
      if (asked?.kind === 'quota') return { do: 'stop_run', stop: { reason: 'quota', error, resumeAt: asked.resumeAt, message: asked.message } };
      if (counts.stalled) {
        return { do: 'stop_run', stop: { reason: 'stall', error, message: `nothing succeeded for ${rateLimit.stallAfterMs} ms while the server kept answering 429` } };
      }
      if (counts.rateLimitedAttempts > rateLimit.retries) return { do: 'fail' };
      // This 429 counts among those in a row: the backoff grows with the storm, not with this request alone.
      const backoff = fullJitter(counts.consecutiveRateLimits + 1, rateLimit.baseDelayMs, rateLimit.maxDelayMs, random);
      const pauseMs = Math.max(asked?.ms ?? 0, backoff);
      const cause = asked && asked.ms >= backoff ? `429, Retry-After ${describeWait(asked.ms)}` : '429, backing off';
      return { do: 'back_off', pauseMs, cause };
    }
    case 'retry': {
      if (counts.attempts >= config.retry.attempts) return { do: 'fail' };
      if (counts.stalled) {
        return { do: 'stop_run', stop: { reason: 'stall', error, message: `nothing succeeded for ${rateLimit.stallAfterMs} ms; last error: ${(error as Error).message}` } };
      }
      return { do: 'retry', delayMs: fullJitter(counts.attempts, config.retry.baseDelayMs, config.retry.maxDelayMs, random) };
    }
    case 'stop_run': {
      const message =
        disposition.reason === 'unauthorized'
          ? 'the key or token was refused (401): nothing else can succeed'
          : 'payment required (402): credits or billing; nothing else can succeed';
      return { do: 'stop_run', stop: { reason: disposition.reason, error, message } };
    }
    case 'stop_endpoint':
      return { do: 'forbid', message: `403 on ${counts.path}: every series of this endpoint stops` };
    case 'aborted':
      return { do: 'aborted' };
    case 'fail':
      return { do: 'fail' };
  }
}
