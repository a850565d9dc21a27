import { isMainThread } from 'node:worker_threads';
import { isInputError } from '../errors/is-input-error.ts';
import { EXIT } from './exit-codes.ts';

const WATCHING = Symbol.for('webdata-etl.input-error-exit');

/**
 * A pipeline file builds its pipeline at its top level (`searchPages`, `definePipeline`, …), before it reaches
 * `runFromCommandLine`: an invalid config there was an uncaught ValidationError — a stack trace, exit 1 — where
 * `webdata-etl run` on the same file says what to fix and exits 2. So on the main thread an input error that nothing
 * catches ends the process as the command line does: its message, exit 2. A monitor changes nothing else: any other
 * uncaught error ends the process as Node ends it, and a program with an 'uncaughtException' handler of its own (a
 * test runner) keeps to it. Once per process, whichever copy of the package (source or built) comes first.
 */
export function exitOnUncaughtInputErrors(): void {
  const slot = globalThis as Record<symbol, unknown>;
  if (!isMainThread || slot[WATCHING]) return;
  slot[WATCHING] = true;
  process.on('uncaughtExceptionMonitor', (error) => {
    if (!isInputError(error) || process.listenerCount('uncaughtException') > 0) return;
    process.stderr.write(`webdata-etl: ${error.message}\n`);
    // Now, before Node prints the error with its stack (stderr to a pipe or file is written synchronously).
    process.exit(EXIT.usage);
  });
}
