import { WebDataEtlError } from './web-data-etl-error.ts';

/** Who holds a lease. */
export interface LeaseHolder {
  pipeline: string;
  pid: number;
  host: string;
  since: string;
}

/** Another live process holds what this run needs: its state store or one of its outputs. Try again later (exit 75). */
export class LeaseHeldError extends WebDataEtlError {
  readonly holder: LeaseHolder;

  constructor(message: string, holder: LeaseHolder) {
    super(message);
    this.name = 'LeaseHeldError';
    this.holder = holder;
  }
}
