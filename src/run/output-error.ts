import { OutputError } from '../errors/output-error.ts';

const FULL = /^(ENOSPC|EDQUOT|SQLITE_FULL)$/;
const READ_ONLY = /^(EROFS|EACCES|EPERM|SQLITE_READONLY.*|SQLITE_CANTOPEN.*)$/;
const LOCKED = /^(SQLITE_BUSY.*|SQLITE_LOCKED.*)$/;
const CORRUPT = /^(SQLITE_NOTADB|SQLITE_CORRUPT.*)$/;
const INVALID_PATH = /^(EISDIR|ENOTDIR|ENAMETOOLONG|ELOOP)$/;

// Which file a failure came from, where the code that wrote it knew (a write to a file descriptor or a SQLite commit
// does not say): the message then names the one file to make room for, not every output of the run.
const sources = new WeakMap<object, string>();
const mark = (error: unknown, path: string) => {
  if (typeof error === 'object' && error !== null && !sources.has(error)) sources.set(error, path);
  return error;
};

/** Runs a write to `path` (sync or async), so that a disk failure inside it is reported as that file's. */
export function writingTo<T>(path: string, write: () => T): T {
  try {
    const result = write();
    return result instanceof Promise ? (result.catch((error: unknown) => Promise.reject(mark(error, path))) as T) : result;
  } catch (error) {
    throw mark(error, path);
  }
}

/**
 * Turns a disk-level failure into an OutputError that says what happened and what to do; anything else as it is.
 * `where` names the outputs the failure may have come from, unless the write that failed said which file it was.
 */
export function explainOutputFailure(error: unknown, where: string): unknown {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string' || error instanceof OutputError) return error;
  // A failed open (or other call by name) says which file: Node's errors carry its path (and a write on the commit
  // thread gives its file's, which the state file's mark around the whole page must not hide).
  const path = (error as { path?: unknown }).path;
  where = typeof path === 'string' ? path : (sources.get(error as object) ?? where);
  const detail = error instanceof Error ? error.message : String(error);
  if (FULL.test(code)) {
    return new OutputError('full', `the disk holding ${where} is full (${detail}): committed data is intact; free some space and run the same command again to resume`, error);
  }
  if (READ_ONLY.test(code)) {
    return new OutputError('read_only', `${where} cannot be written (${detail}): check the path and its permissions, or choose another output path`, error);
  }
  if (LOCKED.test(code)) {
    return new OutputError('locked', `${where} is locked by another process (${detail}): run again once it is released`, error);
  }
  if (CORRUPT.test(code)) {
    return new OutputError(
      'corrupt',
      `${where}: not a SQLite database, or a damaged one (${detail}): give the pipeline another file (the sink's path, or state.path), or move this one aside and restore it from a backup`,
      error,
    );
  }
  if (INVALID_PATH.test(code)) {
    return new OutputError('invalid_path', `${where}: a file cannot be written there (${detail}): choose another output path`, error);
  }
  return error;
}
