/**
 * Query parameters that identify a campaign, a click or a session rather than a page. Dropped from the dedupe key
 * (the served URL stays in `url`). Everything else is kept: two different `?id=` values are two different pages.
 */
const TRACKING = new Set([
  'gclid', 'gclsrc', 'dclid', 'gbraid', 'wbraid', 'fbclid', 'msclkid', 'yclid', 'twclid', 'ttclid', 'li_fat_id',
  'igshid', 'srsltid', 'mc_cid', 'mc_eid', '_ga', '_gl', '_hsenc', '_hsmi', 'mkt_tok', 'vero_id', 'oly_anon_id',
  'oly_enc_id', 'rb_clickid', 's_cid', 'ved',
]);
const TRACKING_PREFIXES = ['utm_', 'pk_', 'mtm_', 'hsa_'];

function isTracking(name: string): boolean {
  const lower = name.toLowerCase();
  return TRACKING.has(lower) || TRACKING_PREFIXES.some((prefix) => lower.startsWith(prefix));
}

/**
 * The canonical form of a URL for deduplication: scheme and host lower-cased, no default port, no fragment, no
 * tracking parameters, the other parameters sorted (by name, then value; duplicates kept). Text that does not
 * parse as an http(s) URL is returned trimmed, so that equal strings still match.
 */
export function canonicalUrl(value: string): string {
  return urlKey(value).key;
}

/** The URL's host, lower-cased, without port; null when it is not an http(s) URL. */
export function domainOf(value: string): string | null {
  return urlKey(value).domain;
}

/** Both of the above from one parse (normalize needs both for every item). */
export function urlKey(value: string): { key: string; domain: string | null } {
  const text = value.trim();
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { key: text, domain: null };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { key: text, domain: null };
  // Most URLs have neither: the setters below re-serialize the whole URL (a lone '?' or '#' is dropped by them too).
  if (text.includes('#')) url.hash = '';
  if (text.includes('?')) {
    const kept = [...url.searchParams].filter(([name]) => !isTracking(name));
    kept.sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
    url.search = new URLSearchParams(kept).toString();
  }
  // WHATWG URL already lower-cases scheme and host and drops default ports.
  return { key: url.href, domain: url.hostname };
}
