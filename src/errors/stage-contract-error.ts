/** A stage broke the one-page-in, one-page-out contract. */
export class StageContractError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StageContractError';
  }
}
