import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';

/**
 * A connection to a SQLite file of the run (the state store, a sink's, the commit thread's), with the settings every
 * one of them gets.
 */
export function openDatabase(file: string): Database.Database {
  mkdirSync(dirname(file), { recursive: true });
  // Created readable by its owner only (a stricter umask narrows it further); SQLite gives its -wal and -shm files
  // the same permissions. An existing file keeps the mode its owner chose.
  closeSync(openSync(file, 'a', 0o600));
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 5000');
    toWal(db);
    // WAL with synchronous=NORMAL survives a killed process; power loss is out of scope (docs/design.md#crash-scope).
    db.pragma('synchronous = NORMAL');
    // Checkpoint the WAL every ~40 MB rather than every 4 MB: a checkpoint syncs the files, and at thousands
    // of pages a minute the default's syncs add up.
    db.pragma('wal_autocheckpoint = 10000');
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/** How long a new file's switch to WAL waits for another process opening it at the same moment. */
const WAL_WAIT_MS = 5000;

/**
 * Switches the file to WAL (once per file: it stays so). The switch takes the file's exclusive lock and SQLite answers
 * SQLITE_BUSY at once, busy timeout or not, while another connection holds a lock — as when two workers open a new
 * state file together — so the switch is tried again, for up to WAL_WAIT_MS.
 */
function toWal(db: Database.Database): void {
  const until = Date.now() + WAL_WAIT_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() >= until) throw error;
      // A synchronous wait: opening a database is synchronous, and this happens once per file, at its creation.
      Atomics.wait(pause, 0, 0, 10);
    }
  }
}

