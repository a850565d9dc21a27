import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** 400: the request was invalid. Sending it again cannot help. */
export class BadRequestError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('bad_request', false, message, details);
  }
}
