import { domainToUnicode } from 'node:url';

/** The longest label the rank history's legend shows whole. */
export const MAX_LABEL = 40;

/**
 * A result without a title, named as a reader would name it: its domain and path, without the scheme, `www.`, the
 * query or the fragment (`https://www.example.com/a/b?utm_source=x` → `example.com/a/b`). Too long for the legend,
 * the domain and the last segment, which tells pages of one site apart (`example.com/…/b`), cut at the end if need
 * be. Undefined for what is not a URL with a host.
 */
export function urlLabel(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.hostname === '') return undefined;
  const host = (domainToUnicode(parsed.hostname) || parsed.hostname).replace(/^www\./, '');
  const segments = parsed.pathname.split('/').filter(Boolean).map(decoded);
  const whole = [host, ...segments].join('/');
  if (whole.length <= MAX_LABEL) return whole;
  return clip(segments.length > 1 ? `${host}/…/${segments.at(-1) as string}` : whole, MAX_LABEL);
}

function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
