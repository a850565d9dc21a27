import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** Any other status of 300 or more, redirects included: the contract counts them as failures and we never follow them. */
export class UnexpectedStatusError extends WebDataError {
  readonly location: string | undefined;

  constructor(message: string, details: WebDataErrorDetails & { location?: string | undefined }) {
    super('unexpected_status', false, message, details);
    this.location = details.location;
  }
}
