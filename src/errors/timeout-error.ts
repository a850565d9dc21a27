import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** No complete answer within `timeoutMs`. The server may have done (and charged for) the work. */
export class TimeoutError extends WebDataError {
  readonly timeoutMs: number;

  constructor(message: string, details: WebDataErrorDetails & { timeoutMs: number }) {
    super('timeout', true, message, details);
    this.timeoutMs = details.timeoutMs;
  }
}
