// Failures the server answered with a status: each class says how a caller should react to it.
import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

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
