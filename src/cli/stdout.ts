import { fstatSync, statSync } from 'node:fs';

/**
 * stdout as the command line's output. An output named `-` is stdout, as for most tools. Its reader may go away before
 * the output ends (`| head`): a write then fails with EPIPE, which means the output is done with, not that anything
 * failed — nothing more is written, and nothing is said about it.
 */
export const STDOUT = '-';

export function isStdout(out: string | undefined): boolean {
  return out === STDOUT;
}

/**
 * `out` as the command line writes it: `-` when it names this process's own stdout (/dev/stdout, /proc/self/fd/1) and
 * that is a pipe, a socket or a terminal, which is then written through the stream like `-` (a socket cannot even be
 * opened by name: ENXIO); else `out` as it is (a file stdout is redirected to is replaced whole, as any file).
 */
export function outputName(out: string | undefined): string | undefined {
  if (out === undefined || isStdout(out)) return out;
  try {
    const named = statSync(out);
    const stdout = fstatSync(1);
    return !named.isFile() && named.dev === stdout.dev && named.ino === stdout.ino ? STDOUT : out;
  } catch {
    return out;
  }
}

let watching = false;
let gone = false;
const listeners = new Set<() => void>();

/**
 * Watches this process's stdout (once; again is nothing): its reader going away (EPIPE) is noted and told to the
 * listeners of `onStdoutGone`, where it was an unhandled 'error' event with a stack trace. Any other error on it is
 * thrown as before.
 */
export function watchStdout(): void {
  if (watching) return;
  watching = true;
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    gone = true;
    for (const listener of listeners) listener();
  });
}

/** Whether stdout's reader has gone away (once `watchStdout` watches). */
export function stdoutGone(): boolean {
  return gone;
}

/** Tells `listener` when stdout's reader goes away (at once if it has). Returns what stops telling it. */
export function onStdoutGone(listener: () => void): () => void {
  if (gone) listener();
  else listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Writes `text` to stdout; resolves once it is written, or once it cannot be (the reader went away). */
export function writeStdout(text: string): Promise<void> {
  return new Promise((resolve) => process.stdout.write(text, () => resolve()));
}

/**
 * Whether `error` ended an output whose reader went away: stdout's (`out` absent or `-`), or that of a pipe or device
 * `out` names (/dev/stdout, a FIFO: written in place, output-file.ts), whose EPIPE comes from the write itself. A
 * database's broken connection is not one: it comes as an OutputError, and a file is not a pipe.
 */
export function readerWentAway(error: unknown, out: string | undefined): boolean {
  if (out === undefined || isStdout(out)) return gone;
  const { code, syscall } = (error ?? {}) as { code?: unknown; syscall?: unknown };
  if (code !== 'EPIPE' || syscall !== 'write') return false;
  try {
    const stat = statSync(out);
    return stat.isFIFO() || stat.isCharacterDevice() || stat.isSocket();
  } catch {
    return false;
  }
}
