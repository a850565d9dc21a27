import * as errors from '../errors/index.ts';
import { UsageError } from '../errors/usage-error.ts';
import type { Worker } from 'node:worker_threads';
import { entryBeside, heapLimitMb, onBoundedThread } from './bounded-thread.ts';
import type { RunEvent, RunOptions } from './run-types.ts';
import type { RunSummary } from './summary.ts';

/** What the run's thread posts: each event, then the summary or the error. */
export type ModuleRunReport = { type: 'event'; event: RunEvent } | { type: 'done'; summary: RunSummary } | { type: 'failed'; error: PostedError };

/** An error as it crosses threads: its class by name, its own fields (a structured clone keeps neither). */
export interface PostedError {
  name: string;
  message: string;
  stack?: string | undefined;
  fields: Record<string, unknown>;
}

/**
 * `run(url)`: the pipeline module at `url` (its default export, or a JSON config) runs on a thread of its own with a
 * bounded heap (bounded-thread.ts), so that a host program's run keeps to the same memory as the command line's.
 * The options cross to it; events, signals and the outcome cross back. A client or a clock cannot cross.
 */
export async function runModule(url: URL, options: RunOptions): Promise<RunSummary> {
  if (url.protocol !== 'file:') throw new UsageError(`run(url) takes a file: URL of a pipeline module or JSON config; got ${url.protocol}`);
  if (options.client !== undefined || options.clock !== undefined) {
    throw new UsageError('run(url): `client` and `clock` cannot cross to the run\'s thread; give `baseUrl` and `apiKey` instead, or pass the pipeline itself');
  }
  const heapMb = heapLimitMb(options.env ?? process.env);
  const { signal, abortSignal, onEvent, client: _client, clock: _clock, env, ...rest } = options;
  // process.env is not an object a thread can be sent; its entries are.
  const crossing = { ...rest, ...(env === undefined ? {} : { env: { ...env } }) };
  // A signal already aborted goes with the options: as a message it would arrive after the run had begun.
  const aborted = { stop: signal?.aborted === true, abort: abortSignal?.aborted === true };
  let outcome: ModuleRunReport | undefined;
  const onMessage = (report: ModuleRunReport) => {
    if (report.type === 'event') onEvent?.(report.event);
    else outcome = report;
  };
  // The caller's signals, as messages: stop and abort.
  const attach = (worker: Worker) => {
    const stop = () => worker.postMessage({ type: 'stop' });
    const abort = () => worker.postMessage({ type: 'abort' });
    signal?.addEventListener('abort', stop, { once: true });
    abortSignal?.addEventListener('abort', abort, { once: true });
    return () => {
      signal?.removeEventListener('abort', stop);
      abortSignal?.removeEventListener('abort', abort);
    };
  };
  const data = { url: url.href, options: crossing, aborted, events: onEvent !== undefined };
  await onBoundedThread(entryBeside(import.meta.url, 'run-module-entry'), data, { heapMb, onMessage, attach });
  if (outcome?.type === 'done') return outcome.summary;
  if (outcome?.type === 'failed') throw rebuilt(outcome.error);
  throw new Error('the run\'s thread ended without a summary (process.exit() in a stage or sink?)');
}

/** Posts an error with its class's name and its own fields. */
export function postedError(error: unknown): PostedError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error), fields: {} };
  // JSON keeps what a summary or a log would; the key is never in an error's fields (redacted where they are made).
  let fields: Record<string, unknown> = {};
  try {
    fields = JSON.parse(JSON.stringify({ ...error })) as Record<string, unknown>;
  } catch {
    // A field JSON cannot hold (a BigInt, a cycle): the class and the message still cross.
  }
  return { name: error.name, message: error.message, stack: error.stack, fields };
}

/** The error again, of its webdata-etl class where it has one, so that `instanceof` works in the host. */
function rebuilt(posted: PostedError): Error {
  const Class = (errors as Record<string, unknown>)[posted.name];
  const prototype = typeof Class === 'function' && Class.prototype instanceof Error ? (Class.prototype as Error) : Error.prototype;
  const error = Object.assign(Object.create(prototype) as Error, posted.fields);
  Object.defineProperties(error, {
    name: { value: posted.name, writable: true, configurable: true },
    message: { value: posted.message, writable: true, configurable: true },
    stack: { value: posted.stack, writable: true, configurable: true },
  });
  return error;
}
