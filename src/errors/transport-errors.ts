// Failures of the exchange itself: no answer, a cut one, one that breaks the contract, or the caller's abort.
import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

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
