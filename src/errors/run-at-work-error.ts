import { WebDataEtlError } from './web-data-etl-error.ts';

/**
 * The pipeline's run is at work, and this invocation may only start one (a scheduled occurrence:
 * `webdata-etl worker`, docs/schedules.md): it does not join it. Try again later (exit 75).
 */
export class RunAtWorkError extends WebDataEtlError {
  readonly runId: string;

  constructor(message: string, runId: string) {
    super(message);
    this.name = 'RunAtWorkError';
    this.runId = runId;
  }
}
