import type { ServerResponse } from 'node:http';
import type { ResolvedSimulatorOptions } from './options.ts';
import type { KeyAccount, Refusal } from './plans.ts';

/** How the simulator writes its answers: bodies, the error bodies of refusals and faults, and rate-limit headers. */

export function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': typeof body === 'string' && status !== 200 ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

export function sendMalformed(res: ServerResponse, form: 'truncated' | 'not-json' | 'no-data' | 'html'): void {
  const bodies = {
    truncated: '{"data":[{"title":"cut off in the mid',
    'not-json': 'data: none',
    'no-data': '{"results":[]}',
    html: '<html><body>Service temporarily degraded</body></html>',
  };
  const type = form === 'html' ? 'text/html' : 'application/json; charset=utf-8';
  res.writeHead(200, { 'content-type': type, 'content-length': String(Buffer.byteLength(bodies[form])) });
  res.end(bodies[form]);
}

/** A body of `bytes` bytes that starts like a search page, written chunk by chunk as the client takes them. */
export async function streamOversize(res: ServerResponse, bytes: number, declareLength: boolean): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', ...(declareLength ? { 'content-length': String(bytes) } : {}) });
  const head = Buffer.from('{"data":[{"title":"');
  const filler = Buffer.alloc(64 * 1024, 'x');
  const closed = new Promise<void>((resolve) => res.once('close', resolve));
  let left = bytes;
  for (let chunk = head; left > 0 && !res.destroyed; chunk = filler) {
    const part = chunk.subarray(0, Math.min(chunk.length, left));
    left -= part.length;
    // Backpressure: wait for the client to read (or leave) rather than queue the whole body in memory.
    if (!res.write(part)) await Promise.race([new Promise((resolve) => res.once('drain', resolve)), closed]);
  }
  if (!res.destroyed) res.end();
  await closed;
}

export function refusalBody(refusal: Refusal): Record<string, unknown> {
  const messages: Record<Refusal['reason'], string> = {
    revoked: 'API key revoked',
    suspended: 'account suspended: billing problem',
    endpoint: 'endpoint not included in your plan',
    rate: 'rate limit exceeded',
    concurrency: 'too many concurrent requests',
    quota: 'quota exhausted for this period',
    credits: 'insufficient credits',
  };
  return { error: { code: refusal.reason, message: messages[refusal.reason] } };
}

export function defaultBody(status: number): Record<string, unknown> {
  return { error: { code: `status_${status}`, message: status >= 500 ? 'upstream failure' : `status ${status}` } };
}

type HeaderSettings = Pick<ResolvedSimulatorOptions, 'rateLimitHeaders' | 'retryAfter'>;

/** The key's quota window in the configured style of rate-limit headers (none without a quota). */
export function rateLimitHeaders(settings: HeaderSettings, account: KeyAccount, clock: () => number, epoch: () => number): Record<string, string> {
  const window = settings.rateLimitHeaders === 'none' ? undefined : account.window(clock());
  if (!window) return {};
  const { limit, remaining } = window;
  const reset = Math.max(0, Math.ceil(window.resetMs / 1000));
  const seconds = Math.ceil(window.windowMs / 1000);
  switch (settings.rateLimitHeaders) {
    case 'ietf':
      return { ratelimit: `"default";r=${remaining};t=${reset}`, 'ratelimit-policy': `"default";q=${limit};w=${seconds}` };
    case 'ietf-legacy':
      return { 'ratelimit-limit': String(limit), 'ratelimit-remaining': String(remaining), 'ratelimit-reset': String(reset), 'ratelimit-policy': `${limit};w=${seconds}` };
    default:
      return { 'x-ratelimit-limit': String(limit), 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(Math.ceil(epoch() / 1000) + reset) };
  }
}

export function retryAfterHeader(settings: HeaderSettings, refusal: Refusal, epoch: () => number): Record<string, string> {
  if (refusal.status !== 429 || settings.retryAfter === 'none') return {};
  const seconds = Math.max(1, Math.ceil(refusal.retryAfterMs / 1000));
  if (settings.retryAfter === 'seconds') return { 'retry-after': String(seconds) };
  return { 'retry-after': new Date(epoch() + (seconds + 1) * 1000).toUTCString() };
}
