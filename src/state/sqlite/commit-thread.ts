import { Worker } from 'node:worker_threads';
import { crashCount } from '../../crash-points.ts';
import { entryBeside, heapLimitMb, threadFailure } from '../../threads/bounded-thread.ts';
// A failure there comes back of its own class with its fields (an OutputError's problem, a SQLite error's code).
import { type PostedError, rebuilt } from '../../threads/posted-error.ts';
import type { PageCommit } from '../interfaces.ts';

export type CommitRequest = { type: 'commit'; id: number; commit: PageCommit } | { type: 'close' };
export interface CommitReply {
  id: number;
  error?: PostedError;
  /** The length of each file of the page's `appends` once committed, in their order. */
  bytes?: number[];
}

/**
 * Page commits of a SQLite state store on a thread of their own (docs/design.md#one-transaction-per-page), so that the
 * run's thread goes on with the next pages — answers parsed, stages run — while SQLite writes the last one (and file
 * sinks get its bytes, CSV rendered there): with two cores, neither waits for the other. The thread has its own
 * connection to the file (WAL: the run's connection reads what it commits, and its other writes wait their turn);
 * pages commit in the order given, each whole, and those that wait there while a transaction is written share the
 * next one. The store starts it (`page-commits.ts`); nothing outside the store knows it.
 */
export function commitThread(path: string) {
  // Its heap holds the pages committing (up to 8) and the CSV text it renders, garbage once written. Its young
  // generation trades the CSV path's speed for memory: a smaller one collects so often that CSV slows down, a larger
  // one takes a run of 5 M items past the 250 MB aim; 6 MB is where the measurements put it
  // (docs/benchmarks.md#figures-the-code-cites). The old generation may grow as the run's own (pages of large answers).
  const heapMb = heapLimitMb();
  const thread = new Worker(entryBeside(import.meta.url, 'commit-thread-entry'), {
    workerData: { path, crashes: crashCount() },
    resourceLimits: { maxYoungGenerationSizeMb: 6, maxOldGenerationSizeMb: heapMb },
  });
  const waiting = new Map<number, { resolve(bytes: number[]): void; reject(error: unknown): void }>();
  let next = 1;
  // Once the thread has failed or gone, every page after fails the same way: nothing commits out of order.
  let broken: unknown;
  const fail = (error: unknown) => {
    broken ??= error;
    for (const { reject } of waiting.values()) reject(broken);
    waiting.clear();
  };
  thread.on('message', (message: CommitReply) => {
    if (message.id === 0 && message.error) return fail(rebuilt(message.error));
    const waiter = waiting.get(message.id);
    waiting.delete(message.id);
    if (message.error) waiter?.reject(rebuilt(message.error));
    else waiter?.resolve(message.bytes ?? []);
  });
  // Its heap limit says what to do as the run's own does (WEBDATA_HEAP_MB).
  thread.on('error', (error) => fail(threadFailure(error, heapMb)));
  const exited = new Promise<void>((resolve) => thread.once('exit', () => resolve()));
  void exited.then(() => fail(new Error(`the commit thread of ${path} ended`)));

  return {
    /**
     * Commits the page on the thread — its files' bytes appended, then its transaction with its sinks' rows; resolves
     * once it is committed, to the length of each file of its `appends`.
     */
    commit(commit: PageCommit): Promise<number[]> {
      if (broken !== undefined) return Promise.reject(broken);
      const id = next++;
      return new Promise<number[]>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        thread.postMessage({ type: 'commit', id, commit } satisfies CommitRequest);
      });
    },
    /** Lets the thread go once what was sent is committed (or failed). */
    async close(): Promise<void> {
      if (broken === undefined) thread.postMessage({ type: 'close' } satisfies CommitRequest);
      else await thread.terminate();
      await exited;
    },
  };
}

export type CommitThread = ReturnType<typeof commitThread>;
