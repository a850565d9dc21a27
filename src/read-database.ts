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
  try {
    return probed(path);
  } catch (error) {
    const code = String((error as { code?: unknown }).code);
    if (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')) throw refuse(`is not a SQLite database, or a damaged one (${(error as Error).message})`);
    if (!LEFT_MID_WRITE.has(code)) throw error;
  }
  // A process killed in the middle of a write (a new file not yet switched to WAL) left a hot journal, which a
  // read-only connection may not roll back ("attempt to write a readonly database"). The next writer would roll it
  // back; so does a moment's writable connection here, which changes nothing that was committed, and then the file
  // is read as it was.
  try {
    const writer = new Database(path, { fileMustExist: true });
    try {
      writer.pragma('busy_timeout = 5000');
      writer.prepare(PROBE).get();
    } finally {
      writer.close();
    }
  } catch (error) {
    throw refuse(`was left in the middle of a write by a process that stopped, and cannot be recovered from here (${(error as Error).message}): run its pipeline again, which recovers it`);
  }
  return probed(path);
}

/**
 * The first query, which makes SQLite say what is wrong with a file (`probed`). The ground floor's one statement, kept
 * here rather than in a statements module: it reads nothing of the data (any query would do; this one reads only the
 * schema), and the statement modules are on the floors above, which this one may not import.
 */
const PROBE = 'SELECT count(*) FROM sqlite_master';

/** What a read-only connection answers for a file a killed writer left (a hot journal, a WAL to recover). */
const LEFT_MID_WRITE = new Set(['SQLITE_READONLY_ROLLBACK', 'SQLITE_READONLY_RECOVERY', 'SQLITE_READONLY_CANTINIT']);

/** The file opened read-only, and read once: SQLite says what is wrong with a file only at its first query. */
function probed(path: string): Database.Database {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.prepare(PROBE).get();
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}
