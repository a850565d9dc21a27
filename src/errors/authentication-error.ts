import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** 401: the key (or token) is missing or invalid. Nothing else this run sends can succeed. */
export class AuthenticationError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('authentication', false, message, details);
  }
}
