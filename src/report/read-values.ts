/*
 * The database is a file like any other: whoever could write it could put text where a number belongs, markup in
 * any string, a blob or NULL anywhere, a view that returns anything. Everything read here is converted on the way
 * in — text to a string (clipped), numbers to finite numbers or nothing — so that the page only ever handles the
 * types it declares (and escapes every string it writes: report.ts, svg.ts).
 */

/** Longer strings are clipped: a label is for reading, and a tampered database could hold megabytes in one. */
const MAX_TEXT = 300;

/** A value shown as text: a string as it is (clipped), a number as its digits; NULL, a blob or anything else as ''. */
export function text(value: unknown): string {
  const string = typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'bigint' ? String(value) : '';
  return string.length > MAX_TEXT ? `${string.slice(0, MAX_TEXT - 1)}…` : string;
}

/** A value used as a number: a finite number (SQLite may hand back a bigint), or undefined for anything else. */
export function finite(value: unknown): number | undefined {
  const number = typeof value === 'bigint' ? Number(value) : value;
  return typeof number === 'number' && Number.isFinite(number) ? number : undefined;
}
