/**
 * Parses `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP date. Returns milliseconds from `now`,
 * or `undefined` when the value is missing, unparseable or lies in the past, so that callers can fall back to
 * their own backoff. Zero is returned as zero; whether to honour it is the caller's policy.
 */
export function parseRetryAfter(value: string | readonly string[] | undefined, now: number = Date.now()): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return undefined;
  if (/^\d+(?:\.\d+)?$/.test(text)) {
    const ms = Math.round(Number(text) * 1000);
    return Number.isFinite(ms) ? ms : undefined;
  }
  // Only the date forms RFC 9110 allows: they all name a weekday or a month, unlike stray numbers.
  if (!/[a-z]{3}/i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  const ms = at - now;
  return ms >= 0 ? ms : undefined;
}
