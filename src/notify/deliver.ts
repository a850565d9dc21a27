import { setTimeout as sleep } from 'node:timers/promises';
import type { LookupFunction } from 'node:net';
import type { Dispatcher } from 'undici';
import { parseRetryAfter } from '../client/retry-after.ts';
import { undici } from '../client/undici.ts';
import { USER_AGENT } from '../version.ts';
import { signatureHeaders } from './sign.ts';
import { backoffCeilingMs, type Webhook } from './webhook-config.ts';
import { ADDRESS_REFUSED, webhookDispatcher } from './webhook-dispatcher.ts';

/** The answer's body is read (so that the connection can be reused) up to this much, then dropped: nobody reads it. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** One notification for one webhook: the exact bytes to send, and who they are from. */
export interface Delivery {
  hook: Pick<Webhook, 'url' | 'timeoutMs' | 'retry'>;
  /** The body as sent, byte for byte: what the signature is of, with the id and the attempt's time. */
  body: string;
  /** The HMAC key: WEBDATA_WEBHOOK_SECRET's base64 part, decoded. */
  key: Uint8Array;
  /** Sent as `webhook-id`, the same for every attempt and every later delivery of it: a receiver drops one it has had. */
  id: string;
  /** WEBDATA_ALLOWED_HOSTS: the hosts and addresses that may be private, loopback or link-local (webhook-dispatcher.ts). */
  allowed?: readonly string[] | undefined;
  /** Aborts at once: no further attempt, the notification stays pending (sent again by the next invocation). */
  signal?: AbortSignal | undefined;
  /** Told after each attempt that did not deliver, with what went wrong and the wait before the next. */
  onRetry?: ((attempt: number, error: string, waitMs: number) => void) | undefined;
  /** Tests: a dispatcher of their own, or the resolver names are looked up with; a random source for the jitter; the clock each attempt is signed at. */
  dispatcher?: Dispatcher | undefined;
  lookup?: LookupFunction | undefined;
  random?: (() => number) | undefined;
  now?: (() => number) | undefined;
}

export type DeliveryOutcome =
  | { status: 'delivered'; attempts: number; httpStatus: number }
  /** Every attempt failed, or the receiver refused it for good (a 4xx, a redirect). */
  | { status: 'failed'; attempts: number; error: string }
  /** Aborted before it was delivered or given up: still owed. */
  | { status: 'aborted'; attempts: number; error: string };

type Attempt = { ok: true; httpStatus: number } | { ok: false; error: string; retry: boolean; retryAfterMs?: number | undefined };

/**
 * POSTs a notification, at least once: attempts up to `retry.attempts` on network errors, timeouts, 408, 429 and 5xx,
 * with exponential backoff and full jitter between them (a Retry-After honoured up to `retry.maxDelayMs`); another 4xx
 * or a redirect (never followed) ends it. Bounded: every attempt within `timeoutMs`, so the whole delivery within
 * `worstCaseMs`. Never throws: what happened is the outcome.
 */
export async function deliver(delivery: Delivery): Promise<DeliveryOutcome> {
  const { hook, signal } = delivery;
  const random = delivery.random ?? Math.random;
  const dispatcher = delivery.dispatcher ?? webhookDispatcher(hook.url, delivery.allowed, delivery.lookup);
  const now = delivery.now ?? Date.now;
  let last = '';
  try {
    for (let attempt = 1; attempt <= hook.retry.attempts; attempt++) {
      if (signal?.aborted) return { status: 'aborted', attempts: attempt - 1, error: last || 'aborted before the first attempt' };
      // Signed at each attempt: a receiver refuses a delivery whose time is not within minutes of its clock.
      const headers = { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...signatureHeaders(delivery.key, delivery.id, delivery.body, now()) };
      const outcome = await post(hook, headers, delivery.body, dispatcher, signal);
      if (outcome.ok) return { status: 'delivered', attempts: attempt, httpStatus: outcome.httpStatus };
      last = outcome.error;
      if (signal?.aborted) return { status: 'aborted', attempts: attempt, error: last };
      if (!outcome.retry || attempt === hook.retry.attempts) return { status: 'failed', attempts: attempt, error: last };
      const ceiling = backoffCeilingMs(hook.retry, attempt);
      const waitMs = Math.min(hook.retry.maxDelayMs, Math.max(Math.round(random() * ceiling), outcome.retryAfterMs ?? 0));
      delivery.onRetry?.(attempt, last, waitMs);
      try {
        await sleep(waitMs, undefined, { signal });
      } catch {
        return { status: 'aborted', attempts: attempt, error: last };
      }
    }
    return { status: 'failed', attempts: hook.retry.attempts, error: last };
  } finally {
    // Destroyed, not closed: closing waits for what is in flight, and a receiver that never answers would hold it.
    if (delivery.dispatcher === undefined) await dispatcher.destroy().catch(() => undefined);
  }
}

/** One attempt, within its timeout: the answer's status decides; its body is dropped. */
async function post(hook: Delivery['hook'], headers: Record<string, string>, body: string, dispatcher: Dispatcher, abort: AbortSignal | undefined): Promise<Attempt> {
  const timeout = AbortSignal.timeout(hook.timeoutMs);
  const signal = abort ? AbortSignal.any([timeout, abort]) : timeout;
  try {
    const response = await undici().request(hook.url, { method: 'POST', headers, body, dispatcher, signal });
    // Read to its end or the bound (a larger answer closes the connection instead): never kept, never shown.
    await response.body.dump({ limit: MAX_ANSWER_BYTES, signal }).catch(() => undefined);
    const status = response.statusCode;
    if (status >= 200 && status < 300) return { ok: true, httpStatus: status };
    const error = `HTTP ${status}`;
    if (status >= 300 && status < 400) return { ok: false, error: `${error} (redirects are not followed: give the webhook's final address)`, retry: false };
    if (status === 408 || status === 429 || status >= 500) {
      return { ok: false, error, retry: true, retryAfterMs: parseRetryAfter(response.headers['retry-after']) };
    }
    return { ok: false, error, retry: false };
  } catch (error) {
    if (timeout.aborted) return { ok: false, error: `no answer within ${hook.timeoutMs} ms`, retry: true };
    if (abort?.aborted) return { ok: false, error: 'aborted', retry: false };
    // An address refused (a name resolved to a private one): said as it is, and not tried again, which could only
    // be a bet on another answer from the resolver.
    const refused = [error, (error as { cause?: unknown }).cause].find((each) => (each as { code?: unknown } | undefined)?.code === ADDRESS_REFUSED);
    if (refused instanceof Error) return { ok: false, error: refused.message, retry: false };
    return { ok: false, error: networkError(error), retry: true };
  }
}

/**
 * A failure to connect or to exchange, said by its code: never the error's whole message, which may hold the URL
 * (and its query string's token).
 */
function networkError(error: unknown): string {
  const code = (error as { code?: unknown; cause?: { code?: unknown } }).code ?? (error as { cause?: { code?: unknown } }).cause?.code;
  return typeof code === 'string' ? `network error (${code})` : `network error (${(error as Error).name ?? 'unknown'})`;
}
