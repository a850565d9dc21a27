import { createHash } from 'node:crypto';

/**
 * The most bytes (UTF-8) a key may have where it is stored and indexed: a series id, a dedupe key, a dedupe scope.
 * PostgreSQL refuses a B-tree entry over 2,704 bytes, and some indexes hold two keys and a query; SQLite has no such
 * limit, but keys follow one rule in both, so that dedupe agrees between them (docs/security.md, "Values a database
 * refuses").
 */
export const MAX_KEY_BYTES = 512;

/** What is kept of a long key before its digest: enough to read it by, well inside the bound with the digest. */
const PREFIX_BYTES = 400;

/**
 * A key as it can be stored and indexed anywhere: as it is when it is well formed, holds no NUL and fits
 * `MAX_KEY_BYTES`; else its beginning (lone surrogates and NUL replaced by U+FFFD) and `#sha256=` with the digest of
 * the whole key, so that two different keys stay two keys.
 */
export function storedKey(key: string): string {
  // Three bytes a UTF-16 unit at the most: a short key is known to fit without counting.
  const fits = key.length * 3 <= MAX_KEY_BYTES || Buffer.byteLength(key) <= MAX_KEY_BYTES;
  if (fits && key.isWellFormed() && !key.includes('\0')) return key;
  // The digest of the UTF-16 units: two keys that differ only in a lone surrogate differ here too.
  const digest = createHash('sha256').update(key, 'utf16le').digest('base64url');
  return `${prefix(key.toWellFormed().replaceAll('\0', '\ufffd'), PREFIX_BYTES)}#sha256=${digest}`;
}

/** The longest beginning of `text` (whole code points) within `bytes` of UTF-8. */
function prefix(text: string, bytes: number): string {
  let used = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char);
    if (used + size > bytes) break;
    used += size;
    end += char.length;
  }
  return text.slice(0, end);
}
