import { WebDataEtlError } from './web-data-etl-error.ts';

/**
 * A distributed run's page (or series end) that another worker got to first: this worker stalled past its heartbeat,
 * its series went back to the queue, and the other worker's commit stands. Nothing of the late one was written; the
 * worker drops the series (it is not a failure of the run).
 */
export class SeriesLostError extends WebDataEtlError {
  readonly seriesId: string;

  constructor(seriesId: string, message: string) {
    super(message);
    this.name = 'SeriesLostError';
    this.seriesId = seriesId;
  }
}
