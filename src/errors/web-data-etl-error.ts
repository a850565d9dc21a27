/**
 * Every error webdata-etl throws on purpose extends this one: `instanceof WebDataEtlError` tells the library's own
 * failures (the API's, bad input, a run's, a disk's) from anything else. Each subclass keeps its own `name`, which is
 * what the command line and a thread crossing go by: a pipeline file may load the built package while the command line
 * runs from source, and each copy has its own classes.
 */
export class WebDataEtlError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'WebDataEtlError';
  }
}
