import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** 5xx: a temporary failure on the server or upstream. */
export class ServerError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('server', true, message, details);
  }
}
