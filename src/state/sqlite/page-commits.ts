import type Database from 'better-sqlite3';
import type { RunStore } from '../interfaces.ts';
import { type CommitThread, commitThread } from './commit-thread.ts';
import { pageTransaction } from './page-transaction.ts';

/**
 * How a SQLite store commits pages: on its commit thread (`commit-thread.ts`), started with the first page and let go
 * by `close`, so that the run's thread goes on with the next pages while SQLite writes; or, when `threaded` is false
 * (a store a test or a tool builds by hand), on the store's own connection before `commitPage` returns. Either way in
 * the order handed over, each page whole.
 */
export function sqlitePageCommits(db: Database.Database, threaded: boolean): Pick<RunStore, 'commitPage' | 'queuesCommits' | 'close'> {
  let thread: CommitThread | undefined;
  let here: ReturnType<typeof pageTransaction> | undefined;
  return {
    queuesCommits: true,
    async commitPage(commit) {
      if (!threaded) {
        here ??= pageTransaction(db);
        return here(commit);
      }
      thread ??= commitThread(db.name);
      return thread.commit(commit);
    },
    async close() {
      const closing = thread;
      thread = undefined;
      await closing?.close();
    },
  };
}
