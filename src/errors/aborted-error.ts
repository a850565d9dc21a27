import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** The caller's signal aborted the request. */
export class AbortedError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('aborted', false, message, details);
  }
}
