import { createHash } from 'node:crypto';
import { z } from 'zod';
import { schemeProblem } from '../client/options.ts';

/**
 * How a run ended, as a webhook's `on` names it: the summary's status, but `failed` for a run that finished with
 * failed series (`failed_series`) or whose invocation failed with an error (recorded `interrupted`, with the error).
 */
export const RUN_END_EVENTS = ['completed', 'budget', 'allowance', 'failed', 'stopped', 'interrupted'] as const;
export type RunEndEvent = (typeof RUN_END_EVENTS)[number];

/**
 * What a webhook may be told of (its `on`): a run's end, or `missed`, scheduled occurrences that came due while no
 * worker was up (docs/schedules.md#missed-occurrences), found by a worker when it next looks.
 */
export const NOTIFY_EVENTS = [...RUN_END_EVENTS, 'missed'] as const;
export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

/**
 * A run that ended by its own rules, or was stopped by the API (401, 402, a quota, a stall), and occurrences missed
 * (the workers were down): worth hearing about. `interrupted` (a signal) is what someone did by hand, so it is asked
 * for by name.
 */
export const DEFAULT_EVENTS: readonly NotifyEvent[] = ['completed', 'budget', 'allowance', 'failed', 'stopped', 'missed'];

/**
 * Longest a delivery may take, all its attempts and waits together: it holds up the end of `run()` (not the lease,
 * released before it); one `sending` for longer was left by a process that died (run/notification-delivery.ts).
 */
export const MAX_DELIVERY_MS = 5 * 60_000;

/** At most this many webhooks: they are delivered side by side at the end of a run. */
const MAX_WEBHOOKS = 10;

// Fields that would hold the signing secret (or a credential for the receiver): never read from a pipeline.
const SECRET_FIELD = /secret|password|token|key|auth/i;

/** Refuses a secret in the pipeline by its field, with where it goes instead, before the shape is checked. */
function refuseSecrets(value: unknown, ctx: z.core.$RefinementCtx): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  for (const field of Object.keys(value).filter((name) => SECRET_FIELD.test(name))) {
    ctx.issues.push({
      code: 'custom',
      input: '',
      path: [field],
      message: 'the webhook secret is never read from a pipeline: set WEBDATA_WEBHOOK_SECRET in the environment (every delivery is signed with it; the receiver checks the webhook-signature header)',
    });
  }
  return value;
}

const URL_EXAMPLE = '"https://hooks.example.com/webdata"';

/** A webhook's address: https, or plain http to loopback (the API's own rule); no credentials, no fragment. */
const webhookUrlSchema = z
  .string({ error: `must be a URL string such as ${URL_EXAMPLE}` })
  .trim()
  .transform((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      // The value itself is never echoed: a webhook's URL may carry a token.
      ctx.issues.push({ code: 'custom', input: '', message: `is not a URL; expected e.g. ${URL_EXAMPLE}` });
      return z.NEVER;
    }
    const scheme = schemeProblem(url);
    if (scheme) ctx.issues.push({ code: 'custom', input: '', message: scheme });
    if (url.username || url.password) {
      ctx.issues.push({ code: 'custom', input: '', message: 'must not carry credentials (user:password@): the receiver authenticates the run by the webhook-signature header' });
    }
    if (url.hash) ctx.issues.push({ code: 'custom', input: '', message: 'must not have a fragment (#…): it is never sent' });
    return url.href;
  });

const eventsSchema = z
  .array(z.enum(NOTIFY_EVENTS, { error: `must be one of ${NOTIFY_EVENTS.join(', ')}` }), { error: `must be a list of events: ${NOTIFY_EVENTS.join(', ')}` })
  .min(1, { error: `must name at least one event: ${NOTIFY_EVENTS.join(', ')}` })
  .transform((events) => [...new Set(events)]);

const retrySchema = z.strictObject({
  /** Attempts in all, the first included. */
  attempts: z.int({ error: 'must be a whole number from 1 to 10' }).min(1, { error: 'must be a whole number from 1 to 10' }).max(10, { error: 'must be a whole number from 1 to 10' }).default(5),
  /** The wait before the second attempt, doubled before each next one (full jitter), up to `maxDelayMs`. */
  baseDelayMs: z.int({ error: 'must be a whole number of milliseconds' }).nonnegative({ error: 'must be 0 or more' }).default(1_000),
  /** The longest wait between two attempts, a receiver's Retry-After included. */
  maxDelayMs: z.int({ error: 'must be a whole number of milliseconds' }).nonnegative({ error: 'must be 0 or more' }).max(60_000, { error: 'must be at most 60000 (a minute)' }).default(15_000),
});

export const webhookSchema = z.preprocess(
  refuseSecrets,
  z
    .strictObject({
      /** Where the notifications are POSTed. Its query string may carry a token: only its origin and path are ever shown. */
      url: webhookUrlSchema,
      /** Which ends, and whether missed occurrences, are sent (see NOTIFY_EVENTS). */
      on: eventsSchema.default([...DEFAULT_EVENTS]),
      /** The digest's "top N": URLs that entered or left the first `top` ranks of a query in a country. */
      top: z.int({ error: 'must be a whole number from 1 to 1000' }).min(1, { error: 'must be a whole number from 1 to 1000' }).max(1000, { error: 'must be a whole number from 1 to 1000' }).default(10),
      /** Rank moves within the top N of at least this many places are listed. */
      minRankMove: z.int({ error: 'must be a whole number, 1 or more' }).min(1, { error: 'must be a whole number, 1 or more' }).default(3),
      /** Each attempt, from connecting to the end of the answer (whose body is read, bounded, and dropped). */
      timeoutMs: z.int({ error: 'must be a whole number of milliseconds from 100 to 60000' }).min(100, { error: 'must be at least 100' }).max(60_000, { error: 'must be at most 60000 (a minute)' }).default(10_000),
      retry: retrySchema.default({ attempts: 5, baseDelayMs: 1_000, maxDelayMs: 15_000 }),
    })
    .refine((hook) => worstCaseMs(hook) <= MAX_DELIVERY_MS, {
      error: `retry.attempts × timeoutMs and the waits between them must fit ${MAX_DELIVERY_MS / 60_000} minutes: delivery holds up the end of the run`,
    }),
);

export const notifySchema = z.preprocess(
  refuseSecrets,
  z.strictObject({
    webhooks: z
      .array(webhookSchema, { error: `must be a list of webhooks, [{ "url": ${URL_EXAMPLE} }]` })
      .min(1, { error: `must hold at least one webhook, e.g. [{ "url": ${URL_EXAMPLE} }]` })
      .max(MAX_WEBHOOKS, { error: `must hold at most ${MAX_WEBHOOKS} webhooks` }),
  }),
);

export type Webhook = z.output<typeof webhookSchema>;
export type NotifyOptions = z.input<typeof notifySchema>;
export type Notify = z.output<typeof notifySchema>;

/** The longest one delivery can take: every attempt timing out, and the longest wait between each two. */
export function worstCaseMs(hook: { timeoutMs: number; retry: { attempts: number; baseDelayMs: number; maxDelayMs: number } }): number {
  let waits = 0;
  for (let attempt = 1; attempt < hook.retry.attempts; attempt++) waits += backoffCeilingMs(hook.retry, attempt);
  return hook.retry.attempts * hook.timeoutMs + waits;
}

/** The most the wait after attempt `attempt` (1-based) may be: the base doubled per attempt, up to the maximum. */
export function backoffCeilingMs(retry: { baseDelayMs: number; maxDelayMs: number }, attempt: number): number {
  return Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1));
}

/** Path segments this long are hidden when a webhook is shown: tokens (Slack's, Discord's) live in paths too. */
const LONG_SEGMENT = 16;

/**
 * A webhook as logs, errors, the summary's events and the `notifications` table show it: origin and path, never the
 * query string (tokens), long path segments as `…`.
 */
export function webhookLabel(url: string): string {
  const parsed = new URL(url);
  const path = parsed.pathname
    .split('/')
    .map((segment) => (segment.length >= LONG_SEGMENT ? '…' : segment))
    .join('/');
  return `${parsed.origin}${path}`;
}

/** A webhook's identity across runs (its whole URL, hashed): which configured webhook a pending delivery is for. */
export function webhookKey(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 32);
}
