/** The longest duration a server's header can mean: anything longer is read as "a year or more". */
export const MAX_HEADER_DELAY_MS = 365 * 24 * 60 * 60 * 1000;

/**
 * Milliseconds a header asked for, bounded to [0, a year]; `undefined` for NaN (nothing usable was said). Headers are
 * the server's word, and a hostile or broken one can say anything: bounded, a duration is always a valid Date offset
 * and never overflows a timer.
 */
export function boundHeaderDelay(ms: number): number | undefined {
  if (Number.isNaN(ms)) return undefined;
  return Math.min(Math.max(0, ms), MAX_HEADER_DELAY_MS);
}

/** A header's wait for people: `40 s`, or `a year or more` for one bounded at a year (not the bound as if sent). */
export function describeWait(ms: number): string {
  return ms >= MAX_HEADER_DELAY_MS ? 'a year or more' : `${Math.ceil(ms / 1000)} s`;
}

/**
 * Parses `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP date. Returns milliseconds from `now`, at most
 * a year (a longer or absurd value, `99999999999999999999`, reads as a year: a quota, never a crash or a timer
 * overflow), or `undefined` when the value is missing, unparseable or lies in the past, so that callers can fall
 * back to their own backoff. Zero is returned as zero; whether to honour it is the caller's policy.
 */
export function parseRetryAfter(value: string | readonly string[] | undefined, now: number = Date.now()): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return undefined;
  if (/^\d+(?:\.\d+)?$/.test(text)) return boundHeaderDelay(Math.round(Number(text) * 1000));
  // Only the date forms RFC 9110 allows: they all name a weekday or a month, unlike stray numbers.
  if (!/[a-z]{3}/i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  const ms = at - now;
  return ms >= 0 ? boundHeaderDelay(ms) : undefined;
}
