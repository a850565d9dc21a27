import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import type { AllowanceMeter } from './allowance-meter.ts';
import type { Clock } from './clock.ts';
import type { CreditMeter } from './credit-meter.ts';
import type { FleetKeys } from './fleet-key.ts';
import type { Pacer } from './pacer.ts';
import { budgetSchema } from './budget.ts';

const positive = (what: string) => z.number({ error: `must be a number (${what})` }).positive({ error: `must be greater than 0 (${what})` });
const ms = (what: string) => z.int({ error: `must be a whole number of milliseconds (${what})` }).nonnegative();

/** Requests per second, or a number of requests per interval (converted to the same even spacing). */
export const rateSchema = z.union([
  z.strictObject({ requestsPerSecond: positive('requests per second') }),
  z.strictObject({ requests: z.int().positive(), intervalMs: z.int().positive() }),
]);

/**
 * Where a key's rate controller starts (docs/scheduler.md#a-remembered-start): what an earlier run learned of its limit
 * — the rate that held, the lowest that earned a 429. `trusted`: learned recently, so the rate is taken as allowed (a
 * 429 at it is a bunching, not a fall) and the first probe past it waits as long as after a limit learned now;
 * otherwise it is a first guess, probed past soon. Used only under the configured rate, which it never exceeds.
 */
export const rateStartSchema = z.strictObject({
  rate: positive('requests per second that held'),
  above: positive('requests per second that earned a 429').nullable().optional(),
  trusted: z.boolean(),
});

export const schedulerOptionsSchema = z.strictObject({
  /** The plan's rate. Omitted: no pacing until the server's 429s or rate-limit headers teach one. */
  rate: rateSchema.optional(),
  /** Requests in flight at most. @default 4 */
  concurrency: z.int().positive({ error: 'must be a positive whole number' }).default(4),
  /** 5xx, network errors, timeouts and malformed 2xx: attempts per request (the first included) and backoff. */
  retry: z
    .strictObject({
      /** @default 5 */
      attempts: z.int().positive().default(5),
      /** @default 500 */
      baseDelayMs: ms('first backoff').default(500),
      /** @default 30_000 */
      maxDelayMs: ms('longest backoff').default(30_000),
    })
    .default({ attempts: 5, baseDelayMs: 500, maxDelayMs: 30_000 }),
  /** 429s: their own budget per request, the pause, the quota threshold and the stall breaker. */
  rateLimit: z
    .strictObject({
      /** @default 30 */
      retries: z.int().nonnegative().default(30),
      /** @default 250 */
      baseDelayMs: ms('first pause without Retry-After').default(250),
      /** @default 60_000 */
      maxDelayMs: ms('longest pause without Retry-After').default(60_000),
      /** A Retry-After longer than this is a quota: the run stops resumably instead of waiting. @default 5 * 60_000 */
      maxRetryAfterMs: ms('longest Retry-After to wait for').default(5 * 60_000),
      /** No success for this long while requests keep failing: the run stops. @default 5 * 60_000 */
      stallAfterMs: ms('time without success before giving up').default(5 * 60_000),
    })
    .default({ retries: 30, baseDelayMs: 250, maxDelayMs: 60_000, maxRetryAfterMs: 5 * 60_000, stallAfterMs: 5 * 60_000 }),
  /**
   * The API keys requests are spread over (docs/scheduler.md#a-pool-of-keys), by label: each with the run's `rate` and
   * `concurrency` unless it says otherwise, and a share of the credits (`maxCredits`) if it has one. Each learns its own
   * limit; a request goes to the key free soonest. @default one key, `default`
   */
  keys: z
    .array(
      z.strictObject({
        label: z.string().min(1),
        rate: rateSchema.optional(),
        concurrency: z.int().positive({ error: 'must be a positive whole number' }).optional(),
        maxCredits: z.number().nonnegative().optional(),
        start: rateStartSchema.optional(),
        /** Its allowance, as this process spends it (docs/credits.md#allowances): none, no allowance. */
        allowance: z.custom<AllowanceMeter>((v) => typeof v === 'object' && v !== null && 'take' in v && 'settle' in v).optional(),
      }),
    )
    .min(1)
    .default([{ label: 'default' }]),
  /** Learn the server's limit from 429s and rate-limit headers (on by default). @default true */
  adaptive: z.boolean().default(true),
  /** Credits the run may spend in all, across resumes. */
  budget: budgetSchema.optional(),
  /** Credits per request by endpoint path (default 1). */
  credits: z
    .strictObject({
      /** @default {} */
      weights: z.record(z.string(), z.number().nonnegative()).default({}),
      /** @default 1 */
      defaultWeight: z.number().nonnegative().default(1),
    })
    .default({ weights: {}, defaultWeight: 1 }),
  /** Credits already counted by earlier invocations of the same run. @default 0 */
  spentBefore: z.number().nonnegative().default(0),
  /** Where the scheduler gets its time. @default systemClock */
  clock: z.custom<Clock>((v) => typeof v === 'object' && v !== null && 'now' in v && 'sleep' in v).optional(),
  /** Source of jitter, in [0, 1). @default Math.random */
  random: z.custom<() => number>((v) => typeof v === 'function').optional(),
  /**
   * The seams for a limit shared beyond this process (docs/design.md#the-run-host): a credit meter of your own
   * (reserve, commit, release), which then owns the budget, weights and earlier spend; and a pacer factory (acquire a
   * slot at a rate). Default: in-process ones.
   */
  meter: z.custom<CreditMeter>((v) => typeof v === 'object' && v !== null && 'reserve' in v && 'commit' in v && 'release' in v).optional(),
  /** In a pool, each key's pacer is made with its label (`key`), so that a shared one paces each key on its own. */
  pacer: z.custom<(requestsPerSecond: number, clock: Clock, key?: string) => Pacer>((v) => typeof v === 'function').optional(),
  /** A pool's keys as other processes share them: each key's credit share and retirements (fleet-key.ts). */
  fleet: z.custom<FleetKeys>((v) => typeof v === 'function').optional(),
  /**
   * With a pacer shared by many processes: whether this one learns the rate now (one at a time does, the run's
   * leader, and hears the others' answers through `heard`); the others follow the shared rate and do not adapt.
   */
  learns: z.custom<() => boolean>((v) => typeof v === 'function').optional(),
});

export type SchedulerOptions = z.input<typeof schedulerOptionsSchema>;
export type ResolvedSchedulerOptions = z.output<typeof schedulerOptionsSchema>;
export type Rate = z.input<typeof rateSchema>;
export type RateStart = z.output<typeof rateStartSchema>;

export function resolveSchedulerOptions(options: SchedulerOptions): ResolvedSchedulerOptions {
  return ValidationError.parse(schedulerOptionsSchema, options, 'Invalid scheduler options');
}

/** Requests per second of a rate setting (`Infinity` when none). */
export function requestsPerSecond(rate: z.output<typeof rateSchema> | undefined): number {
  if (!rate) return Number.POSITIVE_INFINITY;
  return 'requestsPerSecond' in rate ? rate.requestsPerSecond : (rate.requests / rate.intervalMs) * 1000;
}
