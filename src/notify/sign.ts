import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header that carries a notification's signature. */
export const SIGNATURE_HEADER = 'webdata-signature';

/** `sha256=<hex HMAC-SHA256 of the body's exact bytes>`, keyed with WEBDATA_WEBHOOK_SECRET. */
export function signBody(body: string | Uint8Array, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * Whether `signature` (the `webdata-signature` header as received) signs `body` (the raw bytes as received, before
 * any JSON parsing) with `secret`. For receivers written in TypeScript; compared in constant time.
 */
export function verifyWebhookSignature(body: string | Uint8Array, signature: string | null | undefined, secret: string): boolean {
  if (typeof signature !== 'string') return false;
  const expected = Buffer.from(signBody(body, secret));
  const given = Buffer.from(signature.trim());
  return given.length === expected.length && timingSafeEqual(given, expected);
}
