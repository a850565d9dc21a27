import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** A 2xx whose body is not the JSON the contract promises. It was probably charged. */
export class MalformedResponseError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('malformed_response', true, message, { ...details, mayHaveBeenCharged: true });
  }
}
