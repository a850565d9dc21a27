import { isMainThread, parentPort, type Worker, workerData } from 'node:worker_threads';
import { onBoundedThread } from './bounded-thread.ts';

/**
 * The one launcher of a run's own thread, with its bounded heap (bounded-thread.ts says why): for the command line
 * (`webdata-etl run`, and a pipeline file run by node: cli/run-on-thread.ts) and for `run(url)` in a program of its user's
 * (run/run-module.ts). What the thread does is its entry's; how it is started, and how its parent's stop and abort
 * reach it, is the same for both. The *parent* is the thread that started the run's thread (the process's main thread).
 */

/**
 * What the parent says to a run's thread: stop (nothing new is sent; what is in flight commits) or abort (what is in
 * flight is cancelled). `reason`, when the parent's signal was aborted with a string: on the command line, the process
 * signal that asked (SIGINT, SIGTERM), for the thread to say so.
 */
export interface ParentMessage {
  type: 'stop' | 'abort';
  reason?: string;
}

/** What the thread is given: its entry's data, and whether the parent had stopped or aborted before it began. */
interface RunThreadData {
  data: unknown;
  aborted: { stop: boolean; abort: boolean };
}

export interface RunThreadOptions<M> {
  /** The old generation's ceiling, in megabytes (`heapLimitMb()`). */
  heapMb: number;
  /** What the thread posts: its events, its outcome. */
  onMessage(message: M): void;
  /** The parent's stop and abort, each passed to the thread when it aborts. */
  stop?: AbortSignal | undefined;
  abort?: AbortSignal | undefined;
  /**
   * Aborted when the parent's stdout can take no more (its reader went away): what the thread writes there is read and
   * dropped from then on, since a thread whose writes wait for a reader that is gone would wait for ever.
   */
  stdoutGone?: AbortSignal | undefined;
}

/**
 * Runs `entry` (see `entryBeside`) on a run's thread with `data` until it ends, passing it the parent's stop and abort.
 * One already aborted goes with the data: as a message it would arrive after the run had begun. Resolves to the
 * thread's exit code; rejects with what ended it otherwise (its heap limit as a HeapLimitError).
 */
export async function onRunThread<M>(entry: URL, data: unknown, options: RunThreadOptions<M>): Promise<number> {
  const { heapMb, onMessage, stop, abort, stdoutGone } = options;
  const given: RunThreadData = { data, aborted: { stop: stop?.aborted === true, abort: abort?.aborted === true } };
  const attach = (thread: Worker) => {
    const forward = (type: ParentMessage['type'], signal: AbortSignal) => () => {
      const message: ParentMessage = typeof signal.reason === 'string' ? { type, reason: signal.reason } : { type };
      thread.postMessage(message);
    };
    const onStop = stop && !stop.aborted ? forward('stop', stop) : undefined;
    const onAbort = abort && !abort.aborted ? forward('abort', abort) : undefined;
    // Unpiped from the parent's stdout when that failed: flowing, with no one reading, its chunks are dropped.
    const drop = () => thread.stdout.resume();
    if (onStop) stop?.addEventListener('abort', onStop, { once: true });
    if (onAbort) abort?.addEventListener('abort', onAbort, { once: true });
    if (stdoutGone?.aborted) drop();
    else stdoutGone?.addEventListener('abort', drop, { once: true });
    return () => {
      if (onStop) stop?.removeEventListener('abort', onStop);
      if (onAbort) abort?.removeEventListener('abort', onAbort);
      stdoutGone?.removeEventListener('abort', drop);
    };
  };
  return onBoundedThread(entry, given, { heapMb, onMessage, attach });
}

/** On a run's thread: the data its parent gave `onRunThread`. */
export function runThreadData<D>(): D {
  return (workerData as RunThreadData).data as D;
}

/** On a run's thread: posts `message` to its parent. */
export function toParent(message: unknown): void {
  parentPort?.postMessage(message);
}

/**
 * On a run's thread: its parent's stop and abort, to `listener` as they come (given before the thread began: at once).
 * Listening does not keep the thread alive once its run is done. Returns what stops listening. Elsewhere (the main
 * thread, a thread `onRunThread` did not start) nothing comes.
 */
export function onParentMessages(listener: (message: ParentMessage) => void): () => void {
  const given = isMainThread ? undefined : (workerData as Partial<RunThreadData> | null | undefined)?.aborted;
  if (given === undefined) return () => undefined;
  if (given.stop) listener({ type: 'stop' });
  if (given.abort) listener({ type: 'abort' });
  const onMessage = (message: Partial<ParentMessage> | null) => {
    if (message?.type === 'stop' || message?.type === 'abort') listener(message as ParentMessage);
  };
  parentPort?.on('message', onMessage);
  parentPort?.unref();
  return () => parentPort?.off('message', onMessage);
}
