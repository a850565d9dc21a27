import { WebDataEtlError } from './web-data-etl-error.ts';

/** Why a run cannot start as asked; the message says what to do. */
export class RunLifecycleError extends WebDataEtlError {
  constructor(message: string) {
    super(message);
    this.name = 'RunLifecycleError';
  }
}
