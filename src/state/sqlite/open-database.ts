import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';

/** A connection to a SQLite file of the run (the state store, a sink's), with the settings every one of them gets. */
export function openDatabase(file: string): Database.Database {
  mkdirSync(dirname(file), { recursive: true });
  // Created readable by its owner only (a stricter umask narrows it further); SQLite gives its -wal and -shm files
  // the same permissions. An existing file keeps the mode its owner chose.
  closeSync(openSync(file, 'a', 0o600));
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    // WAL with synchronous=NORMAL survives a killed process; power loss is out of scope (docs/design.md#crash-scope).
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    // Checkpoint the WAL every ~40 MB rather than every 4 MB: a checkpoint syncs the files, and at thousands
    // of pages a minute the default's syncs add up.
    db.pragma('wal_autocheckpoint = 10000');
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}
