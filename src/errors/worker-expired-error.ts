import { WebDataEtlError } from './web-data-etl-error.ts';

/** A worker of a distributed run asked for credits after it was presumed dead: its reservations were already counted as spent. */
export class WorkerExpiredError extends WebDataEtlError {
  override readonly name = 'WorkerExpiredError';
}
