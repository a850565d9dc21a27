import { createHash } from 'node:crypto';
import { toJson } from '../json.ts';

/**
 * A page's digest, for the `repeat` rule and a resume's next page: SHA-1 of its items' JSON, base64. Hashed an item at
 * a time, the same bytes as the whole list's JSON (`[`, each item's, `,` between, `]`), so that no text of the whole
 * page is made: a page of 100 real items would take a 192 KB string (two-byte, as one `…` makes it), allocated
 * straight into the old generation as every large object is, and garbage at once (docs/benchmarks.md#memory).
 */
export function pageDigest(items: readonly unknown[]): string {
  const hash = createHash('sha1').update('[');
  items.forEach((item, index) => {
    if (index > 0) hash.update(',');
    // As JSON.stringify writes an array's element that has no JSON of its own.
    hash.update(item === undefined || typeof item === 'function' || typeof item === 'symbol' ? 'null' : toJson(item));
  });
  return hash.update(']').digest('base64');
}
