import { WebDataEtlError } from './web-data-etl-error.ts';

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
export class WebDataError extends WebDataEtlError {
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
