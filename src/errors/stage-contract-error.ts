import { WebDataEtlError } from './web-data-etl-error.ts';

/** A stage broke the one-page-in, one-page-out contract. */
export class StageContractError extends WebDataEtlError {
  constructor(message: string) {
    super(message);
    this.name = 'StageContractError';
  }
}
