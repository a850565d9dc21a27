// The commit thread (commit-thread.ts starts it): a connection of its own to the state store's SQLite file, on which
// each page is committed — its file sinks' bytes appended, then its transaction: its state, and the rows of the SQLite
// sinks in the file — in the order sent.
import { parentPort, workerData } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { countCrashesWith } from '../../crash-points.ts';
import { openDatabase } from '../../open-database.ts';
import { postedError } from '../../threads/posted-error.ts';
import type { CommitReply, CommitRequest } from './commit-thread.ts';
import { pageTransaction } from './page-transaction.ts';
import { migrate } from './schema.ts';

const { path, crashes } = workerData as { path: string; crashes: SharedArrayBuffer };
countCrashesWith(crashes);
const reply = (message: CommitReply) => parentPort?.postMessage(message);

let opened: { db: Database.Database; commitOne: ReturnType<typeof pageTransaction> } | undefined;
try {
  const db = openDatabase(path);
  // Made as the store's own connection makes it (it is, by the time a run's first page comes: a no-op then).
  migrate(db);
  opened = { db, commitOne: pageTransaction(db) };
} catch (error) {
  // The run's thread fails every page with this (id 0), and the thread ends: nothing is listened to.
  reply({ id: 0, error: postedError(error) });
  parentPort?.close();
}
if (opened) serve(opened.db, opened.commitOne);

function serve(db: Database.Database, commitOne: ReturnType<typeof pageTransaction>): void {
  // Pages that arrived while the last transaction was being written commit together, in one transaction (each still
  // whole, in order): a COMMIT is most of a small page's cost. A page that fails takes the pages with it back, as a
  // crash would (none of them was answered yet; their series fetch them again).
  let queued: Extract<CommitRequest, { type: 'commit' }>[] = [];
  let closing = false;
  const close = () => {
    db.close();
    parentPort?.close();
  };
  const drain = () => {
    const batch = queued;
    queued = [];
    try {
      const bytes = batch.length === 1 ? [commitOne((batch[0] as (typeof batch)[0]).commit)] : db.transaction(() => batch.map((request) => commitOne(request.commit))).immediate();
      batch.forEach((request, index) => reply({ id: request.id, bytes: bytes[index] as number[] }));
    } catch (error) {
      for (const request of batch) reply({ id: request.id, error: postedError(error) });
    }
    if (closing) close();
  };

  parentPort?.on('message', (request: CommitRequest) => {
    if (request.type === 'close') {
      closing = true;
      if (queued.length === 0) close();
      return;
    }
    queued.push(request);
    // After the messages already here: they join this transaction.
    if (queued.length === 1) setImmediate(drain);
  });
}
