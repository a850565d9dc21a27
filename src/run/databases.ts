import { resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { openDatabase } from '../open-database.ts';
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
