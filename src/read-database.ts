import { statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { ValidationError } from './errors/validation-error.ts';

/**
 * Opens a database the user named for reading (exports, the report, `runs`), read-only.
 *
 * SQLite opens any file and says it is not a database only at the first query, as "file is not a database" without a
 * name: here that, a missing file and a directory are ValidationErrors naming `field` and the file (exit 2), before
 * anything is read or written.
 */
export function openForReading(path: string, field = 'database'): Database.Database {
  const refuse = (message: string) => new ValidationError('Invalid database', [{ path: field, message: `${path} ${message}` }]);
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) throw refuse('does not exist: name the SQLite file a pipeline wrote its results to');
  if (!stat.isFile()) throw refuse('is not a file: name the SQLite file a pipeline wrote its results to');
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.prepare('SELECT count(*) FROM sqlite_master').get();
  } catch (error) {
    db.close();
    const code = String((error as { code?: unknown }).code);
    if (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')) throw refuse(`is not a SQLite database, or a damaged one (${(error as Error).message})`);
    throw error;
  }
  return db;
}
