import { createHmac, timingSafeEqual } from 'node:crypto';
import { signingKey } from './webhook-secret.ts';

/**
 * A delivery's signature, as the Standard Webhooks specification has it (docs/notifications.md#headers-and-the-signature):
 * the HMAC covers the delivery's id and the attempt's time as well as the body, so that a receiver refuses a stale
 * replay (by the time) and a repeat (by the id), and neither can be changed without the key.
 */
export const ID_HEADER = 'webhook-id';
export const TIMESTAMP_HEADER = 'webhook-timestamp';
export const SIGNATURE_HEADER = 'webhook-signature';

/** How far a delivery's time may be from the receiver's clock, either way: the specification's (and its libraries') default. */
export const DEFAULT_TOLERANCE_SECONDS = 5 * 60;

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed with the secret's decoded key. */
export function signDelivery(key: Uint8Array, id: string, timestamp: number, body: string | Uint8Array): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
}

/** The three headers of one attempt, timed `nowMs` (each attempt is signed anew: its time is part of what is signed). */
export function signatureHeaders(key: Uint8Array, id: string, body: string, nowMs: number): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  return { [ID_HEADER]: id, [TIMESTAMP_HEADER]: String(timestamp), [SIGNATURE_HEADER]: signDelivery(key, id, timestamp, body) };
}

/** A delivery verified: its id (the receiver's idempotency key) and time; or why it is refused. */
export type VerifiedDelivery = { ok: true; id: string; timestamp: number } | { ok: false; reason: string };

/** Request headers as Node's `http` gives them (lower-cased names), or a fetch `Headers`. */
export type DeliveryHeaders = { get(name: string): string | null } | Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * Whether a delivery is ours, as Standard Webhooks' libraries check it: `body` the raw bytes as received (before any
 * JSON parsing), `headers` the request's, `secret` the `whsec_…` text of WEBDATA_WEBHOOK_SECRET. The signature is
 * compared in constant time, and the delivery's time must be within `toleranceSeconds` (5 minutes) of `now`: a
 * request replayed later is refused. A receiver then drops a delivery whose `id` it has had (a retry, or a replay
 * within the tolerance). Throws only for a secret that is not a `whsec_` secret (never showing it).
 */
export function verifyWebhookSignature(
  body: string | Uint8Array,
  headers: DeliveryHeaders,
  secret: string,
  options: { toleranceSeconds?: number; now?: Date | number } = {},
): VerifiedDelivery {
  const read = signingKey(secret);
  if (!('key' in read)) throw new TypeError(read.problem);
  const id = header(headers, ID_HEADER);
  const stamp = header(headers, TIMESTAMP_HEADER);
  const signatures = header(headers, SIGNATURE_HEADER);
  if (id === undefined || stamp === undefined || signatures === undefined) {
    return { ok: false, reason: `missing or repeated header: ${ID_HEADER}, ${TIMESTAMP_HEADER} and ${SIGNATURE_HEADER} are needed, once each` };
  }
  if (!/^\d{1,15}$/.test(stamp)) return { ok: false, reason: `${TIMESTAMP_HEADER} is not a time in seconds` };
  const timestamp = Number(stamp);
  const now = Math.floor(Number(options.now ?? Date.now()) / 1000);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (now - timestamp > tolerance) return { ok: false, reason: `too old: sent ${now - timestamp} s ago (at most ${tolerance} s)` };
  if (timestamp - now > tolerance) return { ok: false, reason: `too new: sent ${timestamp - now} s ahead of this clock (at most ${tolerance} s)` };
  const expected = Buffer.from(signDelivery(read.key, id, timestamp, body));
  // Several signatures, space-separated, while a sender rotates its key: one that matches is enough.
  const matches = signatures.split(' ').some((signature) => {
    const given = Buffer.from(signature);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  return matches ? { ok: true, id, timestamp } : { ok: false, reason: 'no signature matches' };
}

/** One header's value; undefined when it is missing or repeated. */
function header(headers: DeliveryHeaders, name: string): string | undefined {
  if (typeof headers.get === 'function') return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  const key = Object.keys(record).find((each) => each.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return typeof value === 'string' ? value.trim() : undefined;
}
