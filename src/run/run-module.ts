import { UsageError } from '../errors/usage-error.ts';
import { entryBeside, heapLimitMb } from '../threads/bounded-thread.ts';
import { onRunThread } from '../threads/run-thread.ts';
import type { RunEvent, RunOptions } from './run-types.ts';
import type { RunSummary } from './summary.ts';
import { type PostedError, rebuilt } from '../threads/posted-error.ts';

/** What the run's thread posts: each event, then the summary or the error. */
export type ModuleRunReport = { type: 'event'; event: RunEvent } | { type: 'done'; summary: RunSummary } | { type: 'failed'; error: PostedError };

/**
 * `run(url)`: the pipeline module at `url` (its default export, or a JSON config) runs on a thread of its own with a
 * bounded heap (threads/run-thread.ts), so that a program's own `run(url)` keeps to the same memory as the command line's.
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
  let outcome: ModuleRunReport | undefined;
  const onMessage = (report: ModuleRunReport) => {
    if (report.type === 'event') onEvent?.(report.event);
    else outcome = report;
  };
  const data = { url: url.href, options: crossing, events: onEvent !== undefined };
  // The caller's signals reach the thread as its stop and abort.
  await onRunThread(entryBeside(import.meta.url, 'run-module-entry'), data, { heapMb, onMessage, stop: signal, abort: abortSignal });
  if (outcome?.type === 'done') return outcome.summary;
  if (outcome?.type === 'failed') throw rebuilt(outcome.error);
  throw new Error('the run\'s thread ended without a summary (process.exit() in a stage or sink?)');
}
