import { randomBytes } from 'node:crypto';
import { closeSync, fchmodSync, fsyncSync, mkdirSync, openSync, realpathSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { ValidationError } from './errors/validation-error.ts';

/**
 * Files a user asks for by name (exports, the HTML report, a summary): written whole or not at all, readable by
 * their owner only.
 *
 * The bytes go to a temporary file beside the target — the same directory, so the same filesystem, so the rename is
 * atomic — created 0600 (a stricter umask narrows it), flushed to disk, then renamed over the target. A failure part
 * way removes the temporary file: the target keeps what it had, or stays absent. A target that already exists keeps
 * its permission bits (the mode its owner chose, as the sinks' files do). A target that is a symlink is followed (the
 * file it points to is replaced, not the link). A target that is not a regular file (/dev/stdout, a FIFO) is written
 * in place: there is no half a file to protect there, and renaming over it would replace the device with a file.
 */

/** What the callback of `writeOutputFileWith` writes through. */
export interface OutputWriter {
  /** Writes all of `data` (a short write is continued), resolving once it is written: await it for backpressure. */
  write(data: string | Uint8Array): Promise<void>;
  /** The open file, for synchronous writers (`writeSync(fd, …)`); do not close it. */
  readonly fd: number;
}

/** Writes `data` to `path` atomically, created 0600. Its parent directories are created if missing. */
export function writeOutputFile(path: string, data: string | Uint8Array): void {
  const target = destination(path);
  if (!target.replace) {
    writeFileSync(target.path, data);
    return;
  }
  const temp = tempName(target.path);
  let fd: number | undefined = openSync(temp, 'wx', 0o600);
  try {
    writeFileSync(fd, data);
    if (target.mode !== undefined) fchmodSync(fd, target.mode);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(temp, target.path);
  } catch (error) {
    if (fd !== undefined) closeSync(fd);
    rmSync(temp, { force: true });
    throw error;
  }
  syncDirectory(dirname(target.path));
}

/**
 * Streams into `path` atomically: `write` writes through the writer it is given; once it resolves, the file is
 * flushed and renamed over `path`. If it throws, the temporary file is removed and `path` is left as it was.
 * Resolves to what `write` resolved to.
 */
export async function writeOutputFileWith<T>(path: string, write: (file: OutputWriter) => Promise<T>): Promise<T> {
  const target = destination(path);
  const temp = target.replace ? tempName(target.path) : target.path;
  const handle = target.replace ? await open(temp, 'wx', 0o600) : await open(temp, 'w');
  let closed = false;
  try {
    const result = await write({
      fd: handle.fd,
      async write(data) {
        const bytes = typeof data === 'string' ? Buffer.from(data) : data;
        for (let offset = 0; offset < bytes.length; ) offset += (await handle.write(bytes, offset, bytes.length - offset)).bytesWritten;
      },
    });
    if (target.replace) {
      if (target.mode !== undefined) await handle.chmod(target.mode);
      await handle.sync();
    }
    closed = true;
    await handle.close();
    if (target.replace) {
      await rename(temp, target.path);
      syncDirectory(dirname(target.path));
    }
    return result;
  } catch (error) {
    if (!closed) await handle.close().catch(() => undefined);
    if (target.replace) await rm(temp, { force: true });
    throw error;
  }
}

/**
 * Refuses, with a ValidationError naming `field` (exit 2 on the command line), an output that is a directory, or that
 * would overwrite one of `databases` (SQLite files being read) or a file SQLite keeps beside one (-wal, -shm,
 * -journal): the same file by real path (symlinks and `..` resolved), or, when the output exists, by device and inode
 * (a hard link). Call it before anything is written.
 */
export function checkOutputPath(out: string, options: { field?: string; databases?: readonly string[]; role?: string } = {}): void {
  const field = options.field ?? 'out';
  const role = options.role ?? 'the database being read';
  const outPath = realTarget(out);
  const outStat = statOf(out);
  if (outStat?.isDirectory()) throw new ValidationError('Invalid output', [{ path: field, message: `${out} is a directory: give a file name` }]);
  for (const database of options.databases ?? []) {
    // SQLite names its companions after the path it opened, with symlinks resolved: both are checked.
    for (const base of new Set([resolve(database), realTarget(database)])) {
      for (const suffix of ['', '-wal', '-shm', '-journal']) {
        const file = `${base}${suffix}`;
        const fileStat = outStat && statOf(file);
        const same = realTarget(file) === outPath || (outStat !== undefined && fileStat !== undefined && fileStat.dev === outStat.dev && fileStat.ino === outStat.ino);
        if (!same) continue;
        const what = suffix === '' ? role : `the ${suffix.slice(1)} file of ${role}`;
        throw new ValidationError('Invalid output', [{ path: field, message: `${out} is ${what} (${database}): writing it would destroy it; give another file` }]);
      }
    }
  }
}

/** Where to write, and how: replaced through a temporary file (keeping an existing file's mode), or written in place. */
function destination(path: string): { path: string; replace: boolean; mode: number | undefined } {
  // A device or a pipe by the name given: /dev/stdout is a link to what fd 1 is, and stat follows it to the pipe,
  // whose real path is a name no file has (/proc/<pid>/fd/pipe:[…]), where a temporary file cannot be made.
  const given = statOf(path);
  if (given && !given.isFile() && !given.isDirectory()) return { path: resolve(path), replace: false, mode: undefined };
  const real = realTarget(path);
  const stat = statOf(real);
  if (stat?.isDirectory()) throw new ValidationError('Invalid output', [{ path: 'out', message: `${path} is a directory: give a file name` }]);
  if (stat && !stat.isFile()) return { path: real, replace: false, mode: undefined };
  mkdirSync(dirname(real), { recursive: true });
  return { path: real, replace: true, mode: stat ? stat.mode & 0o777 : undefined };
}

/** The file a path names once symlinks and `..` are resolved: its real path, or, when absent, its directory's and its name. */
function realTarget(path: string): string {
  const absolute = resolve(path);
  try {
    return realpathSync(absolute);
  } catch {
    try {
      return join(realpathSync(dirname(absolute)), basename(absolute));
    } catch {
      return absolute;
    }
  }
}

function statOf(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/** Hidden, beside the target, never an existing file (`wx`); the name is clipped to stay under the 255 bytes a name may have. */
function tempName(target: string): string {
  return join(dirname(target), `.${basename(target).slice(0, 100)}.${randomBytes(6).toString('hex')}.tmp`);
}

/** The rename itself survives a crash only once the directory is flushed; where a directory cannot be opened, it is not. */
function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Best effort: the file's own bytes are already on disk.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
