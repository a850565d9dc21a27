import { WebDataEtlError } from './web-data-etl-error.ts';

/**
 * The run this invocation was to join or resume is no longer the pipeline's unfinished run (`webdata-etl worker`,
 * docs/schedules.md): it ended, or another took its place. Nothing was done.
 */
export class RunEndedError extends WebDataEtlError {
  readonly runId: string;

  constructor(message: string, runId: string) {
    super(message);
    this.name = 'RunEndedError';
    this.runId = runId;
  }
}
