import { entryBeside, heapLimitMb } from '../threads/bounded-thread.ts';
import { boundHeapGrowth } from '../threads/heap-growth.ts';
import { onRunThread } from '../threads/run-thread.ts';
import { EXIT } from '../run/exit-codes.ts';
import { stopOnSignals } from './signals.ts';
import { onStdoutGone, watchStdout } from './stdout.ts';

/** What a run's own thread does: `webdata-etl run <args>`, or the command line of a pipeline file run by node. */
export type ThreadTask =
  | { kind: 'command'; args: string[] }
  | { kind: 'pipelineFile'; file: string; argv: string[]; pipelineName: string };

/** What the thread posts back when it is done. */
export type ThreadReport = { type: 'exit'; code: number } | { type: 'inProcess' };

/**
 * Runs a command line on a thread of its own (threads/run-thread.ts), passing it the signals this process gets and
 * its terminal. Resolves to the exit code, or to undefined when the task belongs on this thread after all (a pipeline
 * file whose pipeline the thread could not find: see run-thread-entry.ts).
 */
export async function runOnThread(task: ThreadTask): Promise<number | undefined> {
  let heapMb: number;
  try {
    heapMb = heapLimitMb();
  } catch (error) {
    process.stderr.write(`webdata-etl: ${(error as Error).message}\n`);
    return EXIT.usage;
  }
  // Before the run's thread (and its commit thread) start: their heaps grow less past what they hold.
  boundHeapGrowth();
  let report: ThreadReport | undefined;
  // The process's signals are counted here, the first a stop and the second an abort, named by the signal: the thread
  // says what each does, where its progress goes.
  const signals = stopOnSignals(() => undefined);
  // stdout's reader going away (`| head` on a sink writing JSON Lines to "-") stops the run as a first signal would
  // (it resumes), rather than crashing the process on an unhandled EPIPE or leaving the run writing to nowhere.
  watchStdout();
  const stdoutGone = new AbortController();
  const stopTelling = onStdoutGone(() => stdoutGone.abort('stdout closed (EPIPE)'));
  try {
    // A worker's stderr is a pipe to this thread, never a terminal: the live progress line needs to know it is one.
    const entry = entryBeside(import.meta.url, 'run-thread-entry');
    const data = { task, stderrIsTTY: process.stderr.isTTY === true };
    const exitCode = await onRunThread<ThreadReport>(entry, data, {
      heapMb,
      onMessage: (message) => (report = message),
      stop: AbortSignal.any([signals.signal, stdoutGone.signal]),
      abort: signals.abortSignal,
      stdoutGone: stdoutGone.signal,
    });
    if (report?.type === 'inProcess') return undefined;
    // No report: the thread was ended by process.exit() in a stage of the user's.
    return report?.code ?? exitCode;
  } catch (failure) {
    // A heap limit says what to do; anything else is unexpected, with its stack.
    const said = failure instanceof Error && failure.name === 'HeapLimitError' ? failure.message : failure instanceof Error ? failure.stack : String(failure);
    process.stderr.write(`webdata-etl: ${said}\n`);
    return EXIT.unexpected;
  } finally {
    stopTelling();
    signals.dispose();
  }
}
