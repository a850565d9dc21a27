/**
 * An endpoint path below the base URL: starts with "/", only URL path characters, no query string,
 * and no "." or ".." segment — a resolver would fold those into some other endpoint than the one named.
 */
export function isEndpointPath(path: unknown): path is string {
  return typeof path === 'string' && /^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]+$/.test(path) && !/(^|\/)\.\.?(\/|$)/.test(path) && !path.includes('//');
}

export const ENDPOINT_PATH_HINT = 'must be an endpoint path starting with "/" such as "/video/search", without a query string or "." / ".." segments';
