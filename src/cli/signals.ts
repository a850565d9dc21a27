import { isMainThread } from 'node:worker_threads';
import { onParentMessages } from '../threads/run-thread.ts';

/** What the first signal's line says it does, after `SIGTERM: stopping — `. */
const STOPPING_A_RUN = 'nothing new is sent, answers in flight are committed; the run can be resumed.';

/**
 * The first SIGINT or SIGTERM stops the run gracefully (nothing new is sent; answers in flight are committed;
 * the run can be resumed); a second one aborts (requests in flight are cancelled). Returns the two signals to pass
 * to `run()` and a function that removes the handlers. `stopping` says what the stop does, when that is not stopping
 * one run (a worker's: whether a run is at work).
 */
export function stopOnSignals(
  log: (message: string) => void = (m) => process.stderr.write(`${m}\n`),
  stopping: () => string = () => STOPPING_A_RUN,
): {
  signal: AbortSignal;
  abortSignal: AbortSignal;
  dispose(): void;
} {
  const stop = new AbortController();
  const abort = new AbortController();
  const stopFor = (signal: string) => {
    // A stop for another cause than a signal (stdout closed) has no second of its own: a signal aborts.
    const again = /^SIG/.test(signal) ? `${signal} again aborts.` : 'Ctrl-C aborts.';
    log(`${signal}: stopping — ${stopping()} ${again}`);
    stop.abort(signal);
  };
  const abortFor = (signal: string) => {
    log(`${signal}: aborting — requests in flight are cancelled.`);
    abort.abort(signal);
  };
  const handler = (signal: NodeJS.Signals) => {
    if (!stop.signal.aborted) stopFor(signal);
    else if (!abort.signal.aborted) abortFor(signal);
  };
  if (isMainThread) {
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  }
  // On a run's own thread (threads/run-thread.ts) the main thread receives the signals, counts them as above, and
  // says what they came to, with the signal's name.
  const stopListening = onParentMessages((message) => {
    const signal = message.reason ?? 'a signal';
    if (message.type === 'stop' && !stop.signal.aborted) stopFor(signal);
    else if (message.type === 'abort' && !abort.signal.aborted) abortFor(signal);
  });
  return {
    signal: stop.signal,
    abortSignal: abort.signal,
    dispose() {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
      stopListening();
    },
  };
}

/**
 * The next SIGINT or SIGTERM (on a run's own thread: the next stop or abort its parent passes on, or one it had passed
 * before the thread began), as a signal that aborts. For waits after a run, such as the one for a last scrape of its
 * metrics, which a signal ends at once rather than stops. Returns the signal and what stops listening.
 */
export function nextSignal(): { signal: AbortSignal; dispose(): void } {
  const ended = new AbortController();
  const end = () => ended.abort();
  if (isMainThread) {
    process.once('SIGINT', end);
    process.once('SIGTERM', end);
  }
  const stopListening = onParentMessages(end);
  return {
    signal: ended.signal,
    dispose() {
      process.off('SIGINT', end);
      process.off('SIGTERM', end);
      stopListening();
    },
  };
}
