import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { postgresPools } from '../postgres/pools.ts';
import { writingTo } from './output-error.ts';

/**
 * One connection per database file within a run, so that the state store and a SQLite sink on the same file
 * share it (and can commit in one transaction); likewise one pool per PostgreSQL database.
 */
export function databaseRegistry() {
  const open = new Map<string, Database.Database>();
  const pools = postgresPools();
  return {
    postgres: pools.get,
    get(path: string): Database.Database {
      const file = resolve(path);
      let db = open.get(file);
      if (!db) {
        // A failure here (a full disk, a file that is not a database) is reported as this file's, not every output's.
        db = writingTo(file, () => openDatabase(file));
        open.set(file, db);
      }
      return db;
    },
    async closeAll(): Promise<void> {
      for (const db of open.values()) if (db.open) db.close();
      open.clear();
      await pools.closeAll();
    },
  };
}

function openDatabase(file: string): Database.Database {
  mkdirSync(dirname(file), { recursive: true });
  // Created readable by its owner only (a stricter umask narrows it further); SQLite gives its -wal and -shm files
  // the same permissions. An existing file keeps the mode its owner chose.
  closeSync(openSync(file, 'a', 0o600));
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    // WAL with synchronous=NORMAL survives a killed process; power loss is out of scope (DESIGN §4).
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
