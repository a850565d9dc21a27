/**
 * The signing secret, as the Standard Webhooks specification has it (docs/notifications.md#the-secret): `whsec_`
 * followed by the base64 of 24 to 64 random bytes, the bytes being the HMAC key. Its published libraries (npm, PyPI,
 * Go, .NET, …) take the secret in that form as it is, so a receiver uses the same text as WEBDATA_WEBHOOK_SECRET.
 */

/** Where the signing secret comes from: the environment only, never a file. */
export const SECRET_VARIABLE = 'WEBDATA_WEBHOOK_SECRET';

const PREFIX = 'whsec_';
/** The specification's bounds for an HMAC key: 192 bits at least, 512 at most. */
const MIN_KEY_BYTES = 24;
const MAX_KEY_BYTES = 64;

/** How to make a secret, as the errors and the docs say it. */
export const MAKE_SECRET = `node -e "console.log('whsec_' + require('node:crypto').randomBytes(32).toString('base64'))"`;

// Base64 as the libraries decode it: the standard alphabet, padded to a multiple of 4.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The HMAC key a secret stands for, or what is wrong with it (never the secret itself). */
export type SigningKey = { key: Buffer } | { problem: string };

/** Reads a `whsec_…` secret (surrounding spaces, such as a file's last line break, are ignored). */
export function signingKey(secret: string | undefined): SigningKey {
  const text = secret?.trim() ?? '';
  if (text === '') return { problem: `set ${SECRET_VARIABLE} in the environment: every notification is signed with it (${howToMake()})` };
  if (!text.startsWith(PREFIX)) {
    return {
      problem: `${SECRET_VARIABLE} must be a Standard Webhooks secret, "whsec_" followed by the base64 of 24 to 64 random bytes; a secret of another form is not taken, as receivers decode it (${howToMake()}, and give the receiver the same)`,
    };
  }
  const encoded = text.slice(PREFIX.length);
  const key = Buffer.from(encoded, 'base64');
  // Decoded and encoded back the same: nothing the libraries would read otherwise (or not at all).
  if (!BASE64.test(encoded) || key.toString('base64') !== encoded) {
    return { problem: `${SECRET_VARIABLE}: what follows "whsec_" must be base64 (A-Z, a-z, 0-9, +, /, padded with =) (${howToMake()})` };
  }
  if (key.length < MIN_KEY_BYTES || key.length > MAX_KEY_BYTES) {
    return { problem: `${SECRET_VARIABLE} must stand for ${MIN_KEY_BYTES} to ${MAX_KEY_BYTES} bytes; it stands for ${key.length} (${howToMake()})` };
  }
  return { key };
}

function howToMake(): string {
  return `make one with ${MAKE_SECRET}, or "whsec_" followed by the output of \`openssl rand -base64 32\``;
}

/**
 * Every form in which the secret could be shown, for the run's redaction: as set, its base64 part alone, and the key
 * in hex and base64url. The key's raw bytes are not text; what prints them prints one of these.
 */
export function secretForms(secret: string | undefined): string[] {
  const text = secret?.trim() ?? '';
  if (text === '') return [];
  const read = signingKey(text);
  if (!('key' in read)) return [text];
  return [text, text.slice(PREFIX.length), read.key.toString('hex'), read.key.toString('base64url')];
}
