import { WebDataEtlError } from './web-data-etl-error.ts';

/**
 * A run's thread (or its commit thread) used up its heap: a stage or sink keeps more than that in memory. What was
 * committed is kept; the message says to set WEBDATA_HEAP_MB higher and run again (exit 1).
 */
export class HeapLimitError extends WebDataEtlError {
  constructor(message: string) {
    super(message);
    this.name = 'HeapLimitError';
  }
}
