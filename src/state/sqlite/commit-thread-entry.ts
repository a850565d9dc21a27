// The commit thread (commit-thread.ts starts it): a connection of its own to the state store's SQLite file, on which
// each page's transaction is written — its state, and the rows of the SQLite sinks in the file — in the order sent,
// each just after its CSV files' text is appended.
import { parentPort, workerData } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { countCrashesWith, crashPoint } from '../../crash-points.ts';
import { postedError } from '../../threads/posted-error.ts';
import type { CommitReply, CommitRequest } from './commit-thread.ts';
import { openDatabase } from './open-database.ts';
import { openStateStore } from './store.ts';
import { appendRecords } from '../../commits/append-records.ts';

const { path, crashes } = workerData as { path: string; crashes: SharedArrayBuffer };
countCrashesWith(crashes);
const reply = (message: CommitReply) => parentPort?.postMessage(message);

let opened: { db: Database.Database; store: ReturnType<typeof openStateStore> } | undefined;
try {
  const db = openDatabase(path);
  opened = { db, store: openStateStore(db) };
} catch (error) {
  // The run's thread fails every page with this (id 0), and the thread ends: nothing is listened to.
  reply({ id: 0, error: postedError(error) });
  parentPort?.close();
}
if (opened) serve(opened.db, opened.store);

function serve(db: Database.Database, store: ReturnType<typeof openStateStore>): void {
  /**
   * One page: its file sinks' records appended, then its transaction — its state, its sinks' rows, and every sink's
   * checkpoint. Returns the files' new lengths.
   */
  const commitOne = ({ commit, records }: Extract<CommitRequest, { type: 'commit' }>): number[] => {
    const bytes = records.map((file) => {
      const length = appendRecords(file);
      // Where a file sink's own write stops too: its bytes appended, their checkpoint not yet committed.
      if (file.cells.length > 0) crashPoint('file-before-checkpoint');
      return length;
    });

    // The files' checkpoints go with the page's others, which the store records in its transaction.
    const checkpoints = [...commit.checkpoints, ...records.map(({ sinkId }, index) => ({ sinkId, checkpoint: { seq: commit.seq, bytes: bytes[index] as number } }))];
    store.commitPage({ ...commit, checkpoints });
    return bytes;
  };

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
      const bytes = batch.length === 1 ? [commitOne(batch[0] as (typeof batch)[0])] : db.transaction(() => batch.map(commitOne))();
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
