import { UsageError } from '../errors/usage-error.ts';
import type { Sink } from '../sinks/sink.ts';

/**
 * The sinks open in a run of this process. A sink object holds one run's state between its open and its close (its
 * connection, its file, its checkpoint): shared by two runs at once, the first to close would close it under the
 * other, which then failed as "the sink … was not opened" at its next write. Taken when a run opens it, let go when
 * that run closes it.
 */
const inUse = new WeakSet<Sink<unknown>>();

/** Takes `sink` for a run; refuses, by name, one another run of this process has open. */
export function takeSink(sink: Sink<unknown>): void {
  if (inUse.has(sink)) {
    throw new UsageError(
      `the ${sink.kind} sink ${sink.path ?? sink.id} is open in another run of this process: a sink holds one run's state, so runs ` +
        'at the same time each need their own — build the pipeline (and its sinks) once per run, as two processes would',
    );
  }
  inUse.add(sink);
}

export function releaseSink(sink: Sink<unknown>): void {
  inUse.delete(sink);
}
