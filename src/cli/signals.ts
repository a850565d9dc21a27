import { isMainThread, parentPort } from 'node:worker_threads';

/**
 * The first SIGINT or SIGTERM stops the run gracefully (nothing new is sent; answers in flight are committed;
 * the run can be resumed); a second one aborts (requests in flight are cancelled). Returns the two signals to pass
 * to `run()` and a function that removes the handlers.
 */
export function stopOnSignals(log: (message: string) => void = (m) => process.stderr.write(`${m}\n`)): {
  signal: AbortSignal;
  abortSignal: AbortSignal;
  dispose(): void;
} {
  const stop = new AbortController();
  const abort = new AbortController();
  const handler = (signal: NodeJS.Signals) => {
    if (!stop.signal.aborted) {
      log(`${signal}: stopping — nothing new is sent, answers in flight are committed; the run can be resumed. ${signal} again aborts.`);
      stop.abort(signal);
    } else if (!abort.signal.aborted) {
      log(`${signal}: aborting — requests in flight are cancelled.`);
      abort.abort(signal);
    }
  };
  if (isMainThread) {
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  }
  // On a run's own thread (bounded-thread.ts) the signals come from the main thread, which receives them.
  const forwarded = (message: { type?: string; signal?: NodeJS.Signals }) => {
    if (message.type === 'signal' && message.signal) handler(message.signal);
  };
  parentPort?.on('message', forwarded);
  // Listening does not keep the thread alive once its run is done.
  parentPort?.unref();
  return {
    signal: stop.signal,
    abortSignal: abort.signal,
    dispose() {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
      parentPort?.off('message', forwarded);
    },
  };
}
