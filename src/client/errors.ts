import type { z } from 'zod';

/** What went wrong, by how a caller should react to it. */
export type FailureKind =
  | 'bad_request'
  | 'authentication'
  | 'plan'
  | 'rate_limited'
  | 'server'
  | 'unexpected_status'
  | 'network'
  | 'timeout'
  | 'malformed_response'
  | 'aborted';

export interface WebDataErrorDetails {
  /** The endpoint path, e.g. `/searchengine/search` (never the full URL with its query). */
  path: string;
  method?: string | undefined;
  status?: number | undefined;
  /** A bounded, redacted excerpt of the response body: the contract says to read it for context. */
  body?: string | undefined;
  requestId?: string | undefined;
  /** True when the server may have debited credits for this request (a 2xx, or an outcome we cannot see). */
  mayHaveBeenCharged?: boolean | undefined;
  /** A summary of the underlying error (name, code, message), without the original object and whatever it holds. */
  cause?: { name: string; code?: string | undefined; message: string } | undefined;
}

/**
 * Every failure of a request to the API. Subclasses say which class of failure; `retryable` says whether
 * sending the same request again can succeed. Properties are plain data so that errors can be logged,
 * serialized and stored: secrets are redacted before an error is built.
 */
export class WebDataError extends Error {
  readonly kind: FailureKind;
  readonly path: string;
  readonly method: string;
  readonly status: number | undefined;
  readonly body: string | undefined;
  readonly requestId: string | undefined;
  readonly retryable: boolean;
  readonly mayHaveBeenCharged: boolean;

  constructor(kind: FailureKind, retryable: boolean, message: string, details: WebDataErrorDetails) {
    super(message, details.cause ? { cause: details.cause } : undefined);
    this.name = new.target.name;
    this.kind = kind;
    this.path = details.path;
    this.method = details.method ?? 'GET';
    this.status = details.status;
    this.body = details.body;
    this.requestId = details.requestId;
    this.retryable = retryable;
    this.mayHaveBeenCharged = details.mayHaveBeenCharged ?? false;
  }

  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      kind: this.kind,
      message: this.message,
      method: this.method,
      path: this.path,
      status: this.status,
      requestId: this.requestId,
      retryable: this.retryable,
      mayHaveBeenCharged: this.mayHaveBeenCharged,
      body: this.body,
    };
  }
}

/** 400: the request was invalid. Sending it again cannot help. */
export class BadRequestError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('bad_request', false, message, details);
  }
}

/** 401: the key (or token) is missing or invalid. Nothing else this run sends can succeed. */
export class AuthenticationError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('authentication', false, message, details);
  }
}

/** 402 or 403: plan, permission, credits, billing or endpoint availability. */
export class PlanError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('plan', false, message, details);
  }
}

/** 429: rate or quota limit. `retryAfterMs` is the server's `Retry-After`, when it sent a usable one. */
export class RateLimitError extends WebDataError {
  readonly retryAfterMs: number | undefined;

  constructor(message: string, details: WebDataErrorDetails & { retryAfterMs: number | undefined }) {
    super('rate_limited', true, message, details);
    this.retryAfterMs = details.retryAfterMs;
  }

  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), retryAfterMs: this.retryAfterMs };
  }
}

/** 5xx: a temporary failure on the server or upstream. */
export class ServerError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('server', true, message, details);
  }
}

/** Any other status of 300 or more, redirects included: the contract counts them as failures and we never follow them. */
export class UnexpectedStatusError extends WebDataError {
  readonly location: string | undefined;

  constructor(message: string, details: WebDataErrorDetails & { location?: string | undefined }) {
    super('unexpected_status', false, message, details);
    this.location = details.location;
  }
}

/** The connection failed. `mayHaveBeenCharged` is false only when the request surely never reached the server. */
export class NetworkError extends WebDataError {
  readonly code: string | undefined;

  constructor(message: string, details: WebDataErrorDetails & { code?: string | undefined }) {
    super('network', true, message, details);
    this.code = details.code;
  }
}

/** No complete answer within `timeoutMs`. The server may have done (and charged for) the work. */
export class TimeoutError extends WebDataError {
  readonly timeoutMs: number;

  constructor(message: string, details: WebDataErrorDetails & { timeoutMs: number }) {
    super('timeout', true, message, details);
    this.timeoutMs = details.timeoutMs;
  }
}

/** A 2xx whose body is not the JSON the contract promises. It was probably charged. */
export class MalformedResponseError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('malformed_response', true, message, { ...details, mayHaveBeenCharged: true });
  }
}

/** The caller's signal aborted the request. */
export class AbortedError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('aborted', false, message, details);
  }
}

export interface ValidationIssue {
  /** Dotted path of the offending field, e.g. `country` or `sinks.0.path`. */
  path: string;
  message: string;
}

/**
 * Bad input, caught before anything is sent (and so before any credit is spent).
 * Each issue names the field and what would be valid.
 */
export class ValidationError extends Error {
  readonly issues: readonly ValidationIssue[];

  constructor(subject: string, issues: readonly ValidationIssue[]) {
    super(`${subject}:\n${issues.map((i) => `  - ${i.path || '(root)'}: ${i.message}`).join('\n')}`);
    this.name = 'ValidationError';
    this.issues = issues;
  }

  /**
   * Parses `input` with `schema`, or throws a ValidationError naming every bad field (under `pathPrefix`).
   * The one way every options object of the library is checked.
   */
  static parse<S extends z.ZodType>(schema: S, input: unknown, subject: string, pathPrefix = ''): z.output<S> {
    const result = schema.safeParse(input);
    if (!result.success) throw ValidationError.fromZod(subject, result.error, pathPrefix);
    return result.data;
  }

  /** Builds one from a zod error, keeping zod's messages (ours name what is valid; zod's never echo the value). */
  static fromZod(subject: string, error: z.ZodError, pathPrefix = ''): ValidationError {
    return new ValidationError(
      subject,
      error.issues.map((issue) => ({
        path: [pathPrefix, ...issue.path.map(String)].filter(Boolean).join('.'),
        message: issue.message,
      })),
    );
  }
}
