import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

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
