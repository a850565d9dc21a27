import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { LAST_DAY } from './days.ts';

const rate = z.number().min(0).max(1);

/** Which requests a fault rule applies to; every given field must match. */
const matchSchema = z.strictObject({
  path: z.string().optional(),
  method: z.string().optional(),
  /** Name of the key (see `keys[].name`). */
  key: z.string().optional(),
  q: z.string().optional(),
  page: z.int().optional(),
  country: z.string().optional(),
  lang: z.string().optional(),
});

const ruleBase = {
  match: matchSchema.default({}),
  /** How many matching requests the rule applies to (then it is spent). */
  times: z.int().positive().optional(),
  /** Matching requests to let through before the rule applies. */
  after: z.int().nonnegative().default(0),
};

/** A scripted fault: deterministic, for tests. */
export const faultRuleSchema = z.discriminatedUnion('fault', [
  z.strictObject({
    ...ruleBase,
    fault: z.literal('status'),
    status: z.int().min(100).max(599),
    body: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
    headers: z.record(z.string(), z.string()).default({}),
  }),
  /** Never answer: the connection stays open until the client gives up or the simulator closes. */
  z.strictObject({ ...ruleBase, fault: z.literal('hang'), charged: z.boolean().default(false) }),
  /** Destroy the connection. With `charged`, after debiting the credits: an ambiguous outcome. */
  z.strictObject({ ...ruleBase, fault: z.literal('reset'), charged: z.boolean().default(false) }),
  /** Answer 200 (and charge) with a body that breaks the contract. */
  z.strictObject({
    ...ruleBase,
    fault: z.literal('malformed'),
    form: z.enum(['truncated', 'not-json', 'no-data', 'html']).default('truncated'),
  }),
  z.strictObject({ ...ruleBase, fault: z.literal('redirect'), status: z.int().min(300).max(399).default(302), location: z.string().optional() }),
  /** Answer normally after a delay. */
  z.strictObject({ ...ruleBase, fault: z.literal('delay'), ms: z.int().nonnegative() }),
  /** Send the status line and part of a 200 body, then stall: the client must time out while reading. */
  z.strictObject({ ...ruleBase, fault: z.literal('stall-body') }),
  /**
   * Answer 200 (and charge) with a body of `bytes` bytes, streamed as the client reads it and never held whole (it can
   * be far larger than the simulator's memory); `declareLength` sends its Content-Length, otherwise it is chunked.
   */
  z.strictObject({ ...ruleBase, fault: z.literal('oversize'), bytes: z.int().positive(), declareLength: z.boolean().default(false) }),
]);

export type FaultRule = z.input<typeof faultRuleSchema>;
export type ResolvedFaultRule = z.output<typeof faultRuleSchema>;

export const keySchema = z
  .strictObject({
    /** Sent as `x-api-key`. */
    key: z.string().min(1).optional(),
    /** Sent as `Authorization: Bearer <token>`, the JWT alternative. */
    token: z.string().min(1).optional(),
    /** How stats and fault rules refer to the key (never the key itself). */
    name: z.string().min(1),
    /** Credit balance; `null` is unlimited. A request whose weight exceeds it gets a 402. @default null */
    credits: z.number().nonnegative().nullable().default(null),
    /** Token bucket: sustained requests per second and burst size. `null` is unlimited. @default null */
    ratePerSecond: z.number().positive().nullable().default(null),
    /** @default 1 */
    burst: z.int().positive().default(1),
    /** Requests in flight at once; more get a 429. `null` is unlimited. @default null */
    maxConcurrent: z.int().positive().nullable().default(null),
    /** A quota: at most `requests` accepted per window; beyond it a 429 whose Retry-After is the window's end. */
    quota: z.strictObject({ requests: z.int().positive(), windowMs: z.int().positive() }).optional(),
    /** Endpoint paths this key's plan includes; others get a 403. Default: all. */
    endpoints: z.array(z.string()).optional(),
    /** `suspended` answers 403 (billing), `revoked` answers 401. @default 'active' */
    status: z.enum(['active', 'suspended', 'revoked']).default('active'),
    /**
     * The key is revoked (401, `status` becomes `revoked`) once it has been admitted this many requests: a key withdrawn
     * mid-run, where it is, with no test or benchmark timing it. `null`: never. @default null
     */
    revokeAfter: z.int().nonnegative().nullable().default(null),
  })
  .refine((k) => k.key !== undefined || k.token !== undefined, { error: 'needs a key or a token' });

export type SimulatedKey = z.input<typeof keySchema>;
export type ResolvedKey = z.output<typeof keySchema>;

export const DEFAULT_WEIGHTS: Readonly<Record<string, number>> = {
  '/searchengine/search': 1,
  '/video/search': 2,
  '/appstore/reviews': 1,
  '/products/search': 3,
};

export const simulatorOptionsSchema = z.strictObject({
  /** 0 picks a free port. @default 0 */
  port: z.int().min(0).max(65535).default(0),
  /** @default '127.0.0.1' */
  host: z.string().default('127.0.0.1'),
  /** Changes every generated result and the sequence of random faults. @default 1 */
  seed: z.int().default(1),
  /** The simulated keys and their plans. Default: one key, named `default`, generated at start, with no limits. */
  keys: z.array(keySchema).min(1).optional(),
  /** Credits debited per 2xx, by endpoint path. @default DEFAULT_WEIGHTS */
  weights: z.record(z.string(), z.number().nonnegative()).default({ ...DEFAULT_WEIGHTS }),
  /** How a 429 says when to come back. @default 'seconds' */
  retryAfter: z.enum(['seconds', 'http-date', 'none']).default('seconds'),
  /**
   * Rate-limit headers describing a key's quota window, on every answer to that key: the IETF draft's structured
   * `RateLimit`/`RateLimit-Policy` (`ietf`), its older separate fields (`ietf-legacy`), or `X-RateLimit-*`.
   * @default 'none'
   */
  rateLimitHeaders: z.enum(['none', 'ietf', 'ietf-legacy', 'x-ratelimit']).default('none'),
  /** Results per query (before the country's own additions); a fixed number, or by default 25 to 95 from the query's hash. */
  resultsPerQuery: z.int().nonnegative().optional(),
  /** What pages past the last one answer: empty (the usual) or the last page again (some engines do). @default 'empty' */
  pastEnd: z.enum(['empty', 'repeat-last']).default('empty'),
  /** Item field names: one family for all, or `mixed` (each query gets one, as different engines would). @default 'mixed' */
  shape: z.enum(['mixed', 'serp', 'bing', 'brave', 'tavily']).default('mixed'),
  /**
   * Re-rank neighbouring results every this many milliseconds of wall-clock time, as engines do between days, so
   * that runs some time apart see rankings move (the same results, in another order). 0: never (deterministic).
   * @default 0
   */
  driftEveryMs: z.int().nonnegative().default(0),
  /**
   * The simulated day (0 to 3650): search answers come from each series' ranking on that day, which moves on some days
   * and not others, at the series' own rate, and are the same on the same day whatever the time (docs/client.md#days).
   * `Simulator.setDay` and `advanceDay` change it; `driftEveryMs` is ignored while a day is set. Unset: no days, as ever.
   */
  day: z.int().min(0).max(LAST_DAY).optional(),
  /**
   * How large search items are: `short`, the default answers' (200 to 400 bytes of JSON: the fields each family
   * names, one-line snippets), or `real`, as large as real engines' answers of each family (about 600 bytes a serp
   * item, 900 a Bing one, 1,800 a Brave one, 570 a Tavily one: long snippets, cached pages, proxied images), for
   * benchmarks of what a run holds and writes (docs/client.md#item-sizes). A day's items are never shorter than the
   * days' own (`full-items.ts`). @default 'short'
   */
  itemSize: z.enum(['short', 'real']).default('short'),
  /** Share of items without a title. @default 0.06 */
  untitledRate: rate.default(0.06),
  /** Largest `count` accepted; more is a 400. @default 100 */
  maxCount: z.int().positive().default(100),
  /** Answer a request this many milliseconds late: a number, or a uniform range. @default 0 */
  latencyMs: z.union([z.number().nonnegative(), z.strictObject({ min: z.number().nonnegative(), max: z.number().nonnegative() })]).default(0),
  /** Random faults, drawn in arrival order from the seed (each rate 0 by default). */
  faults: z
    .strictObject({
      serverErrorRate: rate.default(0),
      hangRate: rate.default(0),
      resetRate: rate.default(0),
      malformedRate: rate.default(0),
      redirectRate: rate.default(0),
    })
    .default({ serverErrorRate: 0, hangRate: 0, resetRate: 0, malformedRate: 0, redirectRate: 0 }),
  /** Scripted faults, applied in order (the first that matches wins). @default [] */
  rules: z.array(faultRuleSchema).default([]),
  /** Entries kept in the request log (oldest dropped first). @default 100_000 */
  logLimit: z.int().nonnegative().default(100_000),
  /** Milliseconds since an arbitrary origin; injectable so that rate-limit tests need no real waiting. @default performance.now */
  clock: z.custom<() => number>((v) => typeof v === 'function').optional(),
  /**
   * Wall-clock time, milliseconds since the Unix epoch (for HTTP dates, Unix-time resets and drift); default the
   * system's. Share a virtual clock's `epoch` with the scheduler so that both read the same time.
   */
  epoch: z.custom<() => number>((v) => typeof v === 'function').optional(),
});

export type SimulatorOptions = z.input<typeof simulatorOptionsSchema>;
export type ResolvedSimulatorOptions = z.output<typeof simulatorOptionsSchema>;

export function resolveSimulatorOptions(options: SimulatorOptions): ResolvedSimulatorOptions {
  return ValidationError.parse(simulatorOptionsSchema, options, 'Invalid simulator options');
}
