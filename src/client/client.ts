import type { Dispatcher } from 'undici';
import { defaultDispatcher } from './dispatcher.ts';
import type { z } from 'zod';
import { type Redactor, redactor } from '../redact.ts';
import type { AllowedCodes } from './codes.ts';
import { MalformedResponseError } from '../errors/malformed-response-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { ENDPOINT_PATH_HINT, isEndpointPath } from './endpoint-path.ts';
import { type ClientOptions, resolveClientOptions } from './options.ts';
import { type SearchParams, type ValidSearchParams, parseSearchParams } from './search-params.ts';
import { type Answer, exchange, type ResponseHeaders } from './transport.ts';

export const SEARCH_PATH = '/searchengine/search';

/** One result item exactly as served: every field kept. The contract only promises an optional `title`. */
export type Item = { readonly [field: string]: unknown };

export interface ResponseMeta {
  status: number;
  headers: ResponseHeaders;
  requestId: string | undefined;
  /** Size of the body as received, in bytes. */
  bytes: number;
  durationMs: number;
}

export interface SearchResponse extends ResponseMeta {
  /** The response's `data` array: one element per result item, fields as served. */
  data: Item[];
  /** The whole parsed body, for fields beside `data`. */
  body: Record<string, unknown>;
  /** The parameters as sent (trimmed, lower-cased). */
  params: ValidSearchParams;
}

export interface EndpointRequest<T = unknown> {
  /** Defaults to GET, or POST when a body is given. */
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** A catalog path appended to the base URL, e.g. `/video/search`. */
  path: string;
  /** Query-string parameters; `undefined` values are left out, arrays repeat the parameter. */
  query?: Record<string, string | number | boolean | undefined | ReadonlyArray<string | number | boolean>>;
  /** A JSON body (the contract's "typed JSON body"). */
  body?: unknown;
  /** A zod schema for the response body; a 2xx that does not match is a `MalformedResponseError`. */
  schema?: z.ZodType<T>;
}

export interface EndpointResponse<T = unknown> extends ResponseMeta {
  body: T;
}

export interface CallOptions {
  /** Cancels the request, including the reading of its body. */
  signal?: AbortSignal | undefined;
  /**
   * Codes allowed for this call beyond ISO, on top of the client's own `extraCountries`/`extraLangs`: a source that
   * accepted an engine-specific code passes it here, so that what it validated is what the client sends.
   */
  allow?: AllowedCodes | undefined;
}

export interface Client {
  /** The validated `{base_url}`. */
  readonly baseUrl: string;
  /** `GET /searchengine/search`. Parameters are validated first: nothing is sent that would earn a 400. */
  search(params: SearchParams, options?: CallOptions): Promise<SearchResponse>;
  /** Any other catalog endpoint. */
  request<T = unknown>(request: EndpointRequest<T>, options?: CallOptions): Promise<EndpointResponse<T>>;
  /** Closes the connections of the client's own dispatcher (not of one passed in). */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A client true to the contract. The key (or token) lives only in this closure: it is never a property,
 * so no `inspect`, `JSON.stringify` or error can carry it.
 */
export function createClient(options: ClientOptions): Client {
  const resolved = resolveClientOptions(options);
  const { baseUrl, apiKey, token, tokenHeader, tokenScheme, timeoutMs, maxBodyBytes, userAgent, onWarning } = resolved;
  // The token alone is enough: wherever the header's "Bearer <token>" is echoed, the token in it is redacted.
  const redact = redactor([apiKey, token, ...resolved.alsoRedact]);
  let warned = false;
  const echoed = () => {
    if (warned) return;
    warned = true;
    onWarning?.(`the server echoed the ${apiKey ? 'API key' : 'token'}; it was redacted`);
  };
  const ownDispatcher = resolved.dispatcher === undefined;
  const dispatcher: Dispatcher = resolved.dispatcher ?? defaultDispatcher(baseUrl);
  const allow = { extraCountries: resolved.extraCountries, extraLangs: resolved.extraLangs };

  const credentials: Record<string, string> = apiKey
    ? { 'x-api-key': apiKey }
    : { [tokenHeader.toLowerCase()]: tokenScheme ? `${tokenScheme} ${token}` : String(token) };

  async function send(method: string, path: string, query: URLSearchParams, body: unknown, signal?: AbortSignal) {
    const url = new URL(baseUrl + path);
    url.search = query.toString();
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': userAgent, ...credentials };
    let payload: string | undefined;
    if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
    return exchange({ dispatcher, timeoutMs, maxBodyBytes, redact, echoed }, { method, path, url, headers, body: payload, signal });
  }

  function parseJson(answer: Answer, method: string, path: string): unknown {
    try {
      return JSON.parse(answer.text);
    } catch (error) {
      throw new MalformedResponseError(
        `${method} ${path} → ${answer.status}: the body is not valid JSON (${(error as Error).message}); it was probably charged`,
        { method, path, status: answer.status, requestId: answer.requestId, body: excerpt(answer.text, redact) },
      );
    }
  }

  const meta = (answer: Answer): ResponseMeta => ({
    status: answer.status,
    headers: answer.headers,
    requestId: answer.requestId,
    bytes: answer.bytes,
    durationMs: answer.durationMs,
  });

  return {
    baseUrl,

    async search(params, { signal, allow: also } = {}) {
      // Merged only when the call brings codes of its own: the search source passes its (usually empty) list on every request.
      const extra = also?.extraCountries?.length || also?.extraLangs?.length;
      const valid = parseSearchParams(params, extra ? { extraCountries: [...allow.extraCountries, ...(also?.extraCountries ?? [])], extraLangs: [...allow.extraLangs, ...(also?.extraLangs ?? [])] } : allow);
      const query = new URLSearchParams();
      for (const [name, value] of Object.entries(valid)) if (value !== undefined) query.set(name, String(value));
      const answer = await send('GET', SEARCH_PATH, query, undefined, signal);
      const body = parseJson(answer, 'GET', SEARCH_PATH);
      const problem = searchBodyProblem(body);
      if (problem) {
        throw new MalformedResponseError(`GET ${SEARCH_PATH} → ${answer.status}: ${problem}; it was probably charged`, {
          path: SEARCH_PATH,
          status: answer.status,
          requestId: answer.requestId,
          body: excerpt(answer.text, redact),
        });
      }
      const record = body as { data: Item[] } & Record<string, unknown>;
      return { ...meta(answer), data: record.data, body: record, params: valid };
    },

    async request<T>(request: EndpointRequest<T>, { signal }: CallOptions = {}) {
      const method = request.method ?? (request.body === undefined ? 'GET' : 'POST');
      const path = checkPath(request.path);
      const answer = await send(method, path, toQuery(request.query), request.body, signal);
      const body = parseJson(answer, method, path);
      if (!request.schema) return { ...meta(answer), body: body as T };
      const parsed = request.schema.safeParse(body);
      if (!parsed.success) {
        throw new MalformedResponseError(
          `${method} ${path} → ${answer.status}: the body does not match the expected schema (${parsed.error.issues
            .slice(0, 3)
            .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
            .join('; ')}); it was probably charged`,
          { method, path, status: answer.status, requestId: answer.requestId, body: excerpt(answer.text, redact) },
        );
      }
      return { ...meta(answer), body: parsed.data };
    },

    async close() {
      if (ownDispatcher) await dispatcher.close();
    },

    async [Symbol.asyncDispose]() {
      await this.close();
    },
  };
}

/** Why a parsed search body breaks the contract, or null. */
function searchBodyProblem(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'the body is not a JSON object';
  const data = (body as { data?: unknown }).data;
  if (!Array.isArray(data)) return 'the body has no "data" array';
  const bad = data.findIndex((item) => typeof item !== 'object' || item === null || Array.isArray(item));
  return bad === -1 ? null : `data[${bad}] is not an object`;
}

function checkPath(path: string): string {
  if (!isEndpointPath(path)) {
    throw new ValidationError('Invalid request (nothing was sent)', [{ path: 'path', message: ENDPOINT_PATH_HINT }]);
  }
  return path;
}

function toQuery(query: EndpointRequest['query']): URLSearchParams {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) params.append(name, String(v));
    else params.set(name, String(value));
  }
  return params;
}

const EXCERPT_CHARS = 2048;

/** The start of a body on one line, for an error. The body was redacted whole; what the cut leaves of a secret is too. */
function excerpt(text: string, redact: Redactor): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > EXCERPT_CHARS ? `${redact.cut(flat, EXCERPT_CHARS)}…` : flat;
}
