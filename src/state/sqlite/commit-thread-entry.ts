// The commit thread (commit-thread.ts starts it): a connection of its own to the state store's SQLite file, on which
// each page's transaction is written — its state, and the rows of the SQLite sinks in the file — in the order sent.
import { parentPort, workerData } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { crashPoint } from '../../crash-points.ts';
import { postedError } from '../../run/posted-error.ts';
import type { CommitReply, CommitRequest } from './commit-thread.ts';
import { openDatabase } from './open-database.ts';
import { openStateStore } from './store.ts';

const { path } = workerData as { path: string };
const reply = (message: CommitReply) => parentPort?.postMessage(message);

let db: Database.Database | undefined;
let tables: ReturnType<typeof openStateStore> | undefined;
try {
  db = openDatabase(path);
  tables = openStateStore(db);
} catch (error) {
  reply({ id: 0, error: postedError(error) });
}
const inserts = new Map<string, Database.Statement>();
const insert = (sql: string) => {
  let statement = inserts.get(sql);
  if (!statement) {
    statement = (db as Database.Database).prepare(sql);
    inserts.set(sql, statement);
  }
  return statement;
};

parentPort?.on('message', (request: CommitRequest) => {
  if (request.type === 'close') {
    db?.close();
    parentPort?.close();
    return;
  }
  if (!tables) return reply({ id: request.id, error: postedError(new Error(`the commit thread could not open ${path}`)) });
  const { commit, rows } = request;
  try {
    tables.commitPage(commit, () => {
      for (const sink of rows) {
        const statement = insert(sink.sql);
        for (const values of sink.values) statement.run(values);
        tables?.checkpoints.set(sink.sinkId, { seq: commit.seq, bytes: null });
      }
      crashPoint('page-transaction');
    });
    reply({ id: request.id });
  } catch (error) {
    reply({ id: request.id, error: postedError(error) });
  }
});
