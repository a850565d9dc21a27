import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** The connection failed. `mayHaveBeenCharged` is false only when the request surely never reached the server. */
export class NetworkError extends WebDataError {
  readonly code: string | undefined;

  constructor(message: string, details: WebDataErrorDetails & { code?: string | undefined }) {
    super('network', true, message, details);
    this.code = details.code;
  }
}
