/**
 * WEBDATA_ALLOWED_HOSTS (comma-separated host names): when set, the only hosts a run may send anything of its own to —
 * the key (the API's address) and its notifications (webhooks). One reading of the list for both, so that the two
 * cannot drift apart.
 */

/** The list, lower-cased, IPv6 brackets removed; undefined when unset or blank (no list: any host). */
export function allowedHosts(list: string | undefined): string[] | undefined {
  if (list === undefined || list.trim() === '') return undefined;
  return list
    .split(',')
    .map((host) => bare(host.trim()))
    .filter(Boolean);
}

/**
 * The host of `url` when it is not on `allowed`; undefined when it is, or when `url` cannot be parsed (its own
 * validation says what is wrong with it).
 */
export function hostRefused(url: string, allowed: readonly string[]): string | undefined {
  let host: string;
  try {
    host = bare(new URL(url.trim()).hostname);
  } catch {
    return undefined;
  }
  return allowed.includes(host) ? undefined : host;
}

const bare = (host: string) => host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
