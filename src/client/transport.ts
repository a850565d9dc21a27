import type { Dispatcher } from 'undici';
import { undici } from './undici.ts';
import type { Redactor } from '../redact.ts';
import { AbortedError } from '../errors/aborted-error.ts';
import { MalformedResponseError } from '../errors/malformed-response-error.ts';
import { NetworkError } from '../errors/network-error.ts';
import { TimeoutError } from '../errors/timeout-error.ts';
import { type WebDataError } from '../errors/web-data-error.ts';
import { statusError } from './status-error.ts';

export interface TransportOptions {
  dispatcher: Dispatcher;
  timeoutMs: number;
  maxBodyBytes: number;
  /** Applied to everything kept from a response (body, headers) or an underlying error, before anything is cut. */
  redact: Redactor;
  /** Called whenever a response (its body or a header) held a secret, which was redacted. */
  echoed: () => void;
}

export interface Outgoing {
  method: string;
  /** The endpoint path, for errors and logs. */
  path: string;
  url: URL;
  headers: Record<string, string>;
  body?: string | undefined;
  signal?: AbortSignal | undefined;
}

export type ResponseHeaders = Record<string, string | string[] | undefined>;

export interface Answer {
  status: number;
  headers: ResponseHeaders;
  requestId: string | undefined;
  /** The body decoded as UTF-8, a leading byte-order mark removed, secrets redacted. */
  text: string;
  bytes: number;
  durationMs: number;
}

/** Characters of an error body kept for context: enough for any error message, bounded against huge pages. */
const ERROR_EXCERPT_CHARS = 4096;
// Read past the excerpt, so that a secret the excerpt's end falls in is read whole and redacted before the cut.
const ERROR_READ_BYTES = 2 * ERROR_EXCERPT_CHARS;
const REQUEST_ID_CHARS = 200;
const REQUEST_ID_HEADERS = ['x-request-id', 'request-id', 'x-correlation-id', 'x-amzn-requestid', 'cf-ray'];

// Failures where the request certainly never reached the server: nothing can have been charged.
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * One HTTP exchange: send, then read the body within the time limit. Any status >= 300 becomes its error
 * class; redirects are never followed (undici's `request` does not follow them).
 */
export async function exchange(options: TransportOptions, outgoing: Outgoing): Promise<Answer> {
  const { method, path, signal } = outgoing;
  const details = { method, path };
  if (signal?.aborted) throw new AbortedError(`${method} ${path}: aborted before sending (not charged)`, details);

  // A timer cleared when the exchange ends, not AbortSignal.timeout: that one lives its whole time limit (30 s) after a
  // request of milliseconds, and holds what listens to it — at hundreds of requests a second, thousands of them.
  const limit = new AbortController();
  const timer = setTimeout(() => limit.abort(new DOMException(`no answer within ${options.timeoutMs} ms`, 'TimeoutError')), options.timeoutMs);
  const timeout = limit.signal;
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  try {
    return await exchangeWithin(options, outgoing, combined, timeout);
  } finally {
    clearTimeout(timer);
  }
}

async function exchangeWithin(options: TransportOptions, outgoing: Outgoing, combined: AbortSignal, timeout: AbortSignal): Promise<Answer> {
  const { method, path, signal } = outgoing;
  const details = { method, path };
  const started = performance.now();
  const failure = (error: unknown, phase: 'send' | 'body', requestId?: string) =>
    transportError(error, { ...details, phase, timeout, signal, timeoutMs: options.timeoutMs, redact: options.redact, requestId });

  let response: Dispatcher.ResponseData;
  try {
    response = await undici().request(outgoing.url, {
      method: method as Dispatcher.HttpMethod,
      headers: outgoing.headers,
      body: outgoing.body,
      signal: combined,
      dispatcher: options.dispatcher,
    });
  } catch (error) {
    throw failure(error, 'send');
  }

  const { statusCode: status } = response;
  // Every header value is redacted before any is read: a Location, a request id or a debugging header can echo the key.
  const headers = redactHeaders(response.headers, options);
  const rawId = pickRequestId(headers);
  const requestId = rawId === undefined ? undefined : options.redact.cut(rawId, REQUEST_ID_CHARS);

  if (status >= 300) {
    const read = await readAtMost(response.body, ERROR_READ_BYTES).catch(() => undefined);
    throw statusError({ ...details, status, headers, redact: options.redact, requestId, body: read && errorExcerpt(read, options) });
  }

  const declared = Number(first(headers['content-length']));
  const tooLarge = () =>
    new MalformedResponseError(
      `${method} ${path} → ${status}: the body is larger than maxBodyBytes (${options.maxBodyBytes}); it was probably charged`,
      { ...details, status, requestId },
    );
  if (declared > options.maxBodyBytes) {
    // Announced too large: not a byte of it is read.
    response.body.destroy();
    throw tooLarge();
  }
  let read: Read;
  try {
    read = await readAtMost(response.body, options.maxBodyBytes);
  } catch (error) {
    throw failure(error, 'body', requestId);
  }
  if (read.truncated) throw tooLarge();
  const bytes = Buffer.concat(read.chunks, read.length);
  return {
    status,
    headers,
    requestId,
    text: scrub(decode(bytes), options),
    bytes: bytes.length,
    durationMs: performance.now() - started,
  };
}

/** The text with its secrets redacted; tells `echoed` when there were any. */
function scrub(text: string, options: TransportOptions): string {
  const clean = options.redact(text);
  if (clean !== text) options.echoed();
  return clean;
}

function redactHeaders(headers: ResponseHeaders, options: TransportOptions): ResponseHeaders {
  const clean: ResponseHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    clean[name] = Array.isArray(value) ? value.map((v) => scrub(v, options)) : value === undefined ? undefined : scrub(value, options);
  }
  return clean;
}

/** The start of an error body on one line: redacted whole first, then cut (a secret at the cut is redacted too). */
function errorExcerpt(read: Read, options: TransportOptions): string {
  const flat = scrub(decode(Buffer.concat(read.chunks, read.length).subarray(0, ERROR_READ_BYTES)), options).replace(/\s+/g, ' ').trim();
  const kept = options.redact.cut(flat, ERROR_EXCERPT_CHARS);
  return read.truncated || flat.length > ERROR_EXCERPT_CHARS ? `${kept}…` : kept;
}

interface FailureContext {
  method: string;
  path: string;
  phase: 'send' | 'body';
  timeout: AbortSignal;
  signal: AbortSignal | undefined;
  timeoutMs: number;
  requestId: string | undefined;
  redact: Redactor;
}

function transportError(error: unknown, context: FailureContext): WebDataError {
  const { method, path, phase, requestId } = context;
  const cause = summarize(error, context.redact);
  const code = cause.code;
  const details = { method, path, requestId, cause };
  // Once the status line arrived with a 2xx, the server has charged; before that, only a refused
  // connection proves the request never reached it.
  const mayHaveBeenCharged = phase === 'body' || !(code && NOT_SENT_CODES.has(code));
  const charged = mayHaveBeenCharged ? 'it may have been charged' : 'not charged';

  if (context.signal?.aborted) {
    return new AbortedError(`${method} ${path}: aborted by the caller (${charged})`, { ...details, mayHaveBeenCharged });
  }
  if (context.timeout.aborted) {
    return new TimeoutError(
      `${method} ${path}: no complete answer within ${context.timeoutMs} ms (${charged}); safe to retry with backoff`,
      { ...details, mayHaveBeenCharged, timeoutMs: context.timeoutMs },
    );
  }
  const certain = isTlsFailure(code) || (code !== undefined && NOT_SENT_CODES.has(code));
  return new NetworkError(
    `${method} ${path}: network error ${code ?? cause.name}: ${cause.message} (${certain ? 'not charged' : charged})`,
    { ...details, code, mayHaveBeenCharged: mayHaveBeenCharged && !certain },
  );
}

function isTlsFailure(code: string | undefined): boolean {
  return code !== undefined && (/CERT|TLS|SSL/.test(code) || code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
}

// An underlying error's message can quote what the server sent; it is kept bounded.
const CAUSE_MESSAGE_CHARS = 1000;

function summarize(error: unknown, redact: Redactor): { name: string; code?: string; message: string } {
  if (!(error instanceof Error)) return { name: 'Error', message: redact.cut(String(error), CAUSE_MESSAGE_CHARS) };
  const withCode = error as Error & { code?: unknown; cause?: { code?: unknown } };
  const code = typeof withCode.code === 'string' ? withCode.code : typeof withCode.cause?.code === 'string' ? withCode.cause.code : undefined;
  const message = redact.cut(error.message, CAUSE_MESSAGE_CHARS);
  return code === undefined ? { name: error.name, message } : { name: error.name, code, message };
}

interface Read {
  chunks: Buffer[];
  length: number;
  /** More than `limit` bytes came: the body was let go of, and `chunks` hold only what was read before. */
  truncated: boolean;
}

/**
 * Reads a body up to `limit` bytes. Past it, stops reading and destroys the body (which also frees the connection):
 * the rest is never buffered, and what was read is not copied (the caller of a body over the limit has no use for it).
 */
async function readAtMost(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number): Promise<Read> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    length += chunk.length;
    if (length > limit) {
      body.destroy();
      return { chunks, length, truncated: true };
    }
  }
  return { chunks, length, truncated: false };
}

const decoder = new TextDecoder('utf-8');

function decode(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function pickRequestId(headers: ResponseHeaders): string | undefined {
  for (const name of REQUEST_ID_HEADERS) {
    const text = first(headers[name]);
    if (text) return text;
  }
  return undefined;
}
