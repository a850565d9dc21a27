// The outcome table (docs/design.md#the-contract-and-what-was-decided) as the scheduler applies it: each class of
// failure, with the request's and the run's counters, leads to one step. No server, no clock: the policy is a function.
import { describe, expect, it } from 'vitest';
import { statusError } from '../../src/client/status-error.ts';
import { AbortedError, NetworkError, TimeoutError } from '../../src/errors/index.ts';
import { classify } from '../../src/schedule/classify.ts';
import { resolveSchedulerOptions } from '../../src/schedule/options.ts';
import { type Counts, nextStep } from '../../src/schedule/outcome-policy.ts';

const path = '/searchengine/search';
const config = resolveSchedulerOptions({ retry: { attempts: 3, baseDelayMs: 1000, maxDelayMs: 30_000 }, rateLimit: { retries: 2, baseDelayMs: 400 } });
const EPOCH = Date.UTC(2030, 0, 1);
// Full jitter draws half the ceiling.
const half = () => 0.5;

const failure = (status: number, headers: Record<string, string> = {}) => statusError({ status, headers, path, redact: (text) => text, now: EPOCH });
const step = (error: unknown, counts: Partial<Counts> = {}) =>
  nextStep(classify(error), { error, path, attempts: 1, rateLimitedAttempts: 1, consecutiveRateLimits: 0, stalled: false, nowEpochMs: EPOCH, ...counts }, config, half);

describe('each class of failure leads to its step', () => {
  it('5xx, network errors and timeouts are retried with a backoff that grows with the attempts', () => {
    expect(step(failure(503))).toEqual({ do: 'retry', delayMs: 500 });
    expect(step(new NetworkError('reset', { path }), { attempts: 2 })).toEqual({ do: 'retry', delayMs: 1000 });
    expect(step(new TimeoutError('slow', { path, timeoutMs: 1000 }), { attempts: 3 })).toEqual({ do: 'fail' });
  });

  it('400, other 4xx and errors that are not the client’s fail the request, not retried', () => {
    expect(step(failure(400))).toEqual({ do: 'fail' });
    expect(step(failure(404))).toEqual({ do: 'fail' });
    expect(step(new Error('a bug'))).toEqual({ do: 'fail' });
  });

  it('401 and 402 stop the run; 403 forbids its endpoint; the caller’s abort is stopped', () => {
    const unauthorized = failure(401);
    expect(step(unauthorized)).toEqual({ do: 'stop_run', stop: { reason: 'unauthorized', error: unauthorized, message: expect.stringContaining('(401)') } });
    expect(step(failure(402))).toMatchObject({ do: 'stop_run', stop: { reason: 'payment_required', message: expect.stringContaining('(402)') } });
    expect(step(failure(403))).toEqual({ do: 'forbid', message: `403 on ${path}: every series of this endpoint stops` });
    expect(step(new AbortedError('aborted', { path }))).toEqual({ do: 'aborted' });
  });

  it('a 429 backs off for its Retry-After, or its own backoff when that is longer or none is given', () => {
    expect(step(failure(429, { 'retry-after': '7' }))).toEqual({ do: 'back_off', pauseMs: 7000, cause: '429, Retry-After 7 s' });
    // The backoff grows with the 429s in a row across the run: 400 × 2² × ½.
    expect(step(failure(429), { consecutiveRateLimits: 2 })).toEqual({ do: 'back_off', pauseMs: 800, cause: '429, backing off' });
    expect(step(failure(429, { 'retry-after': '0' }))).toEqual({ do: 'back_off', pauseMs: 200, cause: '429, backing off' });
  });

  it('a 429 past the request’s own budget fails it; a Retry-After beyond maxRetryAfterMs is a quota stop', () => {
    // rateLimit.retries is 2: the third 429 of one request is one too many.
    expect(step(failure(429), { rateLimitedAttempts: 2 })).toMatchObject({ do: 'back_off' });
    expect(step(failure(429), { rateLimitedAttempts: 3 })).toEqual({ do: 'fail' });
    const quota = step(failure(429, { 'retry-after': '7200' }));
    expect(quota).toMatchObject({ do: 'stop_run', stop: { reason: 'quota', resumeAt: new Date(EPOCH + 7_200_000) } });
  });

  it('once nothing has succeeded for too long, a retry or a 429 stops the run instead (the stall breaker)', () => {
    expect(step(failure(503), { stalled: true })).toMatchObject({ do: 'stop_run', stop: { reason: 'stall', message: expect.stringContaining('last error') } });
    expect(step(failure(429), { stalled: true })).toMatchObject({ do: 'stop_run', stop: { reason: 'stall', message: expect.stringContaining('429') } });
    // A request out of attempts fails as it would have: the stall is for requests that would go on.
    expect(step(failure(503), { stalled: true, attempts: 3 })).toEqual({ do: 'fail' });
  });
});
