import { WebDataEtlError } from './web-data-etl-error.ts';

/** A mistake in how the command was called: shown without a stack trace, exit code 2. */
export class UsageError extends WebDataEtlError {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
