import { boundHeaderDelay } from '../client/retry-after.ts';

/** What a response said about the requests the client's rate-limit window has remaining. */
export interface RateLimitHint {
  /** Requests still allowed in the current window. */
  remaining: number;
  /** Milliseconds until the window resets: at most a year (see `boundHeaderDelay`). */
  resetMs: number;
  /** The window's quota, when sent. */
  limit?: number | undefined;
  /** Sustained rates the server's policies allow (`q` requests per `w` seconds), when sent. */
  policies: readonly Policy[];
}

/** One `RateLimit-Policy` member: `rate` requests per second over a window of `windowMs` (at most a year). */
export interface Policy {
  rate: number;
  windowMs: number;
}

type Headers = Record<string, string | string[] | undefined>;

/**
 * Reads the rate-limit headers servers send, newest convention first:
 * - IETF httpapi-ratelimit-headers (draft 08+): `RateLimit: "default";r=50;t=30` and `RateLimit-Policy: "default";q=100;w=60`;
 * - the same drafts' earlier forms: `RateLimit: limit=100, remaining=50, reset=30`, or separate
 *   `RateLimit-Limit` / `RateLimit-Remaining` / `RateLimit-Reset`, and `RateLimit-Policy: 100;w=60`;
 * - the common `X-RateLimit-Limit` / `X-RateLimit-Remaining` / `X-RateLimit-Reset`, whose reset is delta seconds,
 *   or a Unix time in seconds or milliseconds.
 * Returns nothing when the response has no usable pair of remaining and reset.
 */
export function readRateLimitHeaders(headers: Headers, nowEpochMs: number = Date.now()): RateLimitHint | undefined {
  const policies = readPolicies(text(headers['ratelimit-policy']));
  const structured = text(headers.ratelimit);
  if (structured) {
    const params = parameters(structured);
    const remaining = params.get('r') ?? params.get('remaining');
    const reset = params.get('t') ?? params.get('reset');
    if (remaining !== undefined && reset !== undefined) {
      const resetMs = boundHeaderDelay(reset * 1000);
      if (resetMs !== undefined) return { remaining, resetMs, limit: params.get('limit'), policies };
    }
  }
  for (const prefix of ['ratelimit-', 'x-ratelimit-']) {
    const remaining = number(text(headers[`${prefix}remaining`]));
    const reset = number(text(headers[`${prefix}reset`]));
    if (remaining !== undefined && reset !== undefined) {
      const resetMs = boundHeaderDelay(resetDelta(reset, nowEpochMs));
      if (resetMs !== undefined) return { remaining, resetMs, limit: number(text(headers[`${prefix}limit`])), policies };
    }
  }
  return undefined;
}

function resetDelta(reset: number, nowEpochMs: number): number {
  if (reset > 1e12) return Math.max(0, reset - nowEpochMs); // Unix milliseconds
  if (reset > 1e9) return Math.max(0, reset * 1000 - nowEpochMs); // Unix seconds
  return reset * 1000; // delta seconds
}

/**
 * `"default";q=100;w=60` or `100;w=60`, several separated by commas. Each is returned with its window, so that the
 * scheduler can leave aside a window it would not sleep through (a quota's, not a rate's: see `heed`).
 */
function readPolicies(value: string | undefined): Policy[] {
  if (!value) return [];
  const policies: Policy[] = [];
  for (const member of value.split(',')) {
    const params = parameters(member);
    const quota = params.get('q') ?? number(member.split(';')[0]?.trim());
    const window = params.get('w');
    const windowMs = window === undefined ? undefined : boundHeaderDelay(window * 1000);
    if (quota !== undefined && quota >= 0 && window !== undefined && window > 0 && windowMs !== undefined) {
      policies.push({ rate: quota / window, windowMs });
    }
  }
  return policies;
}

/** Numeric `key=value` parameters of a structured-field item or a comma-separated dictionary. */
function parameters(value: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of value.split(/[;,]/)) {
    const match = /^\s*([a-z][a-z0-9_-]*)\s*=\s*"?(-?\d+(?:\.\d+)?)"?\s*$/i.exec(part);
    if (match?.[1] && match[2] !== undefined) out.set(match[1].toLowerCase(), Number(match[2]));
  }
  return out;
}

function text(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function number(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*-?\d+(?:\.\d+)?\s*$/.test(value)) return undefined;
  return Number(value);
}
