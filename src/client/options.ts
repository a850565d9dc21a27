import type { Dispatcher } from 'undici';
import { z } from 'zod';
import { USER_AGENT } from '../version.ts';
import { ValidationError } from '../errors/validation-error.ts';

const LOOPBACK_HOSTS = new Set(['localhost', '[::1]', '::1']);

/** Loopback hosts may use plain http (the simulator, a local proxy); everything else must use https. */
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127(?:\.\d{1,3}){3}$/.test(hostname) || hostname.endsWith('.localhost');
}

/**
 * Why a URL the run sends to (the API's, a webhook's) may not be used: https, or plain http to a loopback host only.
 * Undefined when it may.
 */
export function schemeProblem(url: URL): string | undefined {
  if (url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname))) return undefined;
  return `must use https (plain http is allowed only for loopback hosts such as 127.0.0.1); got ${url.protocol}//${url.host}`;
}

/** `{base_url}` as the contract defines it: ends with the version prefix `/api/v1`, https unless loopback. */
export const baseUrlSchema = z
  .string({ error: 'must be a URL string such as "https://api.example.com/api/v1"' })
  .trim()
  .transform((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.issues.push({ code: 'custom', input: value, message: 'is not a URL; expected e.g. "https://api.example.com/api/v1"' });
      return z.NEVER;
    }
    const scheme = schemeProblem(url);
    if (scheme) ctx.issues.push({ code: 'custom', input: value, message: scheme });
    if (url.username || url.password) {
      ctx.issues.push({ code: 'custom', input: '', message: 'must not carry credentials; the key goes in WEBDATA_API_KEY' });
    }
    if (url.search || url.hash) {
      ctx.issues.push({ code: 'custom', input: value, message: 'must not have a query string or fragment' });
    }
    const path = url.pathname.replace(/\/+$/, '');
    if (!path.endsWith('/api/v1')) {
      ctx.issues.push({
        code: 'custom',
        input: value,
        message: `must end with the version prefix /api/v1 (e.g. "https://api.example.com/api/v1"); got path "${url.pathname}"`,
      });
    }
    return `${url.origin}${path}`;
  });

/** Node arms no timer longer than this (a longer one fires after 1 ms, so every request would abort at once). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

const TIMEOUT_RANGE = `must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS} (about 24.8 days)`;
/** Time for the whole exchange, from sending to the last byte of the body. */
export const timeoutMsSchema = z.int({ error: TIMEOUT_RANGE }).min(1, { error: TIMEOUT_RANGE }).max(MAX_TIMER_MS, { error: TIMEOUT_RANGE });

/**
 * What HTTP allows in a header value (tab, visible ASCII, space, Latin-1): undici refuses anything else when the
 * request is made, after the scheduler has counted it as sent — so values sent as headers are refused here instead.
 */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

const headerValue = (example: string) =>
  z.string().refine((value) => HEADER_VALUE.test(value), {
    error: `must be an HTTP header value: no line breaks or other control characters, nothing beyond Latin-1 (e.g. "${example}")`,
  });

export const userAgentSchema = headerValue('my-team/1.0').pipe(z.string().min(1, { error: 'must not be empty' }));

// A key is a header value too: one pasted with an invisible character (a zero-width space) is refused here, not sent.
// The messages never show the value.
const secret = (envName: string) =>
  z
    .string({ error: `must be a string (or set ${envName})` })
    .refine((value) => value.trim().length > 0, { error: `must not be empty (or set ${envName})` })
    .refine((value) => HEADER_VALUE.test(value), {
      error: 'must be an HTTP header value: no line breaks or other control characters, nothing beyond Latin-1 (an invisible character pasted with it?)',
    });

const codeList = z.array(z.string().trim().toLowerCase().min(1), { error: 'must be a list of codes' });

export const clientOptionsSchema = z.strictObject({
  /** `{base_url}`, e.g. `https://api.example.com/api/v1`. Required: there is no default service. */
  baseUrl: baseUrlSchema,
  /** The `x-api-key`. Defaults to the environment's `WEBDATA_API_KEY`. */
  apiKey: secret('WEBDATA_API_KEY').optional(),
  /** A JWT, the contract's alternative to a key. Defaults to `WEBDATA_TOKEN`. */
  token: secret('WEBDATA_TOKEN').optional(),
  /** The header that carries the token. */
  tokenHeader: z
    .string()
    .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, { error: 'must be an HTTP header name such as "authorization"' })
    .default('authorization'),
  /** The scheme before the token in that header; `null` sends the bare token. */
  tokenScheme: headerValue('Bearer').nullable().default('Bearer'),
  timeoutMs: timeoutMsSchema.default(30_000),
  userAgent: userAgentSchema.default(USER_AGENT),
  /** Larger 2xx bodies are refused rather than buffered without bound. */
  maxBodyBytes: z.int().positive().default(32 * 1024 * 1024),
  /** Country codes the engine accepts beyond ISO 3166-1 alpha-2 (e.g. `xk`). */
  extraCountries: codeList.default([]),
  /** Language codes the engine accepts beyond ISO 639-1 tags (e.g. `iw`). */
  extraLangs: codeList.default([]),
  /**
   * Told (once per client) when a server echoed the key or token in an answer — a body, even a 2xx one, or a header.
   * What was echoed is redacted before anything reads it; the warning is for whoever runs the server to fix.
   */
  onWarning: z.custom<(message: string) => void>((value) => typeof value === 'function', { error: 'must be a function (message) => void' }).optional(),
  /**
   * Other secrets an answer must not carry, redacted as the client's own key is: the other keys of a pool
   * (docs/pipelines.md#a-pool-of-keys), which one server knows them all.
   */
  alsoRedact: z.array(z.string()).default([]),
  /** An undici dispatcher to send through; by default one that honours HTTPS_PROXY and NO_PROXY. */
  dispatcher: z.custom<Dispatcher>((value) => typeof value === 'object' && value !== null && 'dispatch' in value, {
    error: 'must be an undici Dispatcher',
  }).optional(),
});

export type ClientOptions = z.input<typeof clientOptionsSchema>;
export type ResolvedClientOptions = z.output<typeof clientOptionsSchema>;

/**
 * Validates options and fills the credentials from the environment. The key is never read from a file
 * and never echoed in a message.
 */
export function resolveClientOptions(
  options: ClientOptions,
  env: Readonly<Record<string, string | undefined>> = process.env,
): ResolvedClientOptions {
  const input = { ...options };
  if (input.apiKey === undefined && input.token === undefined) {
    if (env.WEBDATA_API_KEY) input.apiKey = env.WEBDATA_API_KEY;
    else if (env.WEBDATA_TOKEN) input.token = env.WEBDATA_TOKEN;
  }
  const resolved = ValidationError.parse(clientOptionsSchema, input, 'Invalid client options');
  if (resolved.apiKey === undefined && resolved.token === undefined) {
    throw new ValidationError('Invalid client options', [
      { path: 'apiKey', message: 'no credentials: set WEBDATA_API_KEY (or WEBDATA_TOKEN for a JWT), or pass apiKey' },
    ]);
  }
  return resolved;
}
