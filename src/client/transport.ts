import { type Dispatcher, request } from 'undici';
import { AbortedError, MalformedResponseError, NetworkError, TimeoutError, type WebDataError } from './errors.ts';
import { statusError } from './status-error.ts';

export interface TransportOptions {
  dispatcher: Dispatcher;
  timeoutMs: number;
  maxBodyBytes: number;
  /** Applied to everything kept from a response or an underlying error. */
  redact: (text: string) => string;
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
  /** The body decoded as UTF-8, a leading byte-order mark removed. */
  text: string;
  bytes: number;
  durationMs: number;
}

/** Bytes of an error body kept for context: enough for any error message, bounded against huge pages. */
const ERROR_EXCERPT_BYTES = 4096;
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

  const timeout = AbortSignal.timeout(options.timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  const started = performance.now();
  const failure = (error: unknown, phase: 'send' | 'body', requestId?: string) =>
    transportError(error, { ...details, phase, timeout, signal, timeoutMs: options.timeoutMs, redact: options.redact, requestId });

  let response: Dispatcher.ResponseData;
  try {
    response = await request(outgoing.url, {
      method: method as Dispatcher.HttpMethod,
      headers: outgoing.headers,
      body: outgoing.body,
      signal: combined,
      dispatcher: options.dispatcher,
    });
  } catch (error) {
    throw failure(error, 'send');
  }

  const { statusCode: status, headers } = response;
  const rawId = pickRequestId(headers);
  const requestId = rawId === undefined ? undefined : options.redact(rawId);

  if (status >= 300) {
    const excerpt = await readAtMost(response.body, ERROR_EXCERPT_BYTES).catch(() => undefined);
    throw statusError({
      ...details,
      status,
      headers,
      redact: options.redact,
      requestId,
      body: excerpt && oneLine(options.redact(decode(excerpt.bytes)), excerpt.truncated),
    });
  }

  let read: { bytes: Buffer; truncated: boolean };
  try {
    read = await readAtMost(response.body, options.maxBodyBytes);
  } catch (error) {
    throw failure(error, 'body', requestId);
  }
  if (read.truncated) {
    throw new MalformedResponseError(
      `${method} ${path} → ${status}: the body is larger than maxBodyBytes (${options.maxBodyBytes}); it was probably charged`,
      { ...details, status, requestId },
    );
  }
  return {
    status,
    headers,
    requestId,
    text: decode(read.bytes),
    bytes: read.bytes.length,
    durationMs: performance.now() - started,
  };
}

interface FailureContext {
  method: string;
  path: string;
  phase: 'send' | 'body';
  timeout: AbortSignal;
  signal: AbortSignal | undefined;
  timeoutMs: number;
  requestId: string | undefined;
  redact: (text: string) => string;
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

function summarize(error: unknown, redact: (text: string) => string): { name: string; code?: string; message: string } {
  if (!(error instanceof Error)) return { name: 'Error', message: redact(String(error)) };
  const withCode = error as Error & { code?: unknown; cause?: { code?: unknown } };
  const code = typeof withCode.code === 'string' ? withCode.code : typeof withCode.cause?.code === 'string' ? withCode.cause.code : undefined;
  return code === undefined ? { name: error.name, message: redact(error.message) } : { name: error.name, code, message: redact(error.message) };
}

async function readAtMost(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number) {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    length += chunk.length;
    if (length > limit) {
      // Stop reading: the rest is not ours to buffer. Destroying the body also frees the connection.
      body.destroy();
      return { bytes: Buffer.concat(chunks).subarray(0, limit), truncated: true };
    }
  }
  return { bytes: Buffer.concat(chunks, length), truncated: false };
}

const decoder = new TextDecoder('utf-8');

function decode(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

function oneLine(text: string, truncated: boolean): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return truncated ? `${flat}…` : flat;
}

function pickRequestId(headers: ResponseHeaders): string | undefined {
  for (const name of REQUEST_ID_HEADERS) {
    const value = headers[name];
    const text = Array.isArray(value) ? value[0] : value;
    if (text) return text.slice(0, 200);
  }
  return undefined;
}
