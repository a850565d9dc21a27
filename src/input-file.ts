import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { ValidationError } from './errors/validation-error.ts';

export interface InputFileLimit {
  /** The most bytes the file may hold; a larger one is refused, never read whole. */
  maxBytes: number;
  /** The field that named the file (`search.queriesFile`), for the error. */
  field: string;
  /** The error's subject (`Invalid search source`). */
  subject: string;
  /** What to do with a file over the limit. */
  tooLarge: string;
}

/**
 * A local file's text (UTF-8, a BOM dropped), read at most `maxBytes` + 1 bytes deep: a regular file larger than the
 * limit is refused from its size alone, and anything else (a pipe, `/dev/stdin`, a device that never ends) is refused
 * as soon as it has given more. Every failure is a ValidationError naming the field: the file is the user's input.
 */
export function readInputFile(path: string, limit: InputFileLimit): string {
  const refuse = (message: string) => new ValidationError(limit.subject, [{ path: limit.field, message }]);
  const most = `the most is ${bytes(limit.maxBytes)} bytes${limit.maxBytes % MB === 0 ? ` (${limit.maxBytes / MB} MB)` : ''}`;
  const tooLarge = (size: string, read: string) => refuse(`${path} is ${size} bytes; ${most}, and it was ${read}: ${limit.tooLarge}`);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    throw refuse(`cannot be read: ${(error as Error).message}`);
  }
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw refuse(`${path} is a directory, not a file`);
    if (stat.isFile() && stat.size > limit.maxBytes) throw tooLarge(bytes(stat.size), 'not read');
    // A regular file is read into one buffer of its size; one that grows meanwhile, or a stream, grows it up to the limit.
    let buffer = Buffer.allocUnsafe(Math.min(limit.maxBytes, stat.isFile() ? stat.size : 64 * 1024) + 1);
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        if (length > limit.maxBytes) throw tooLarge(`more than ${bytes(limit.maxBytes)}`, 'read no further');
        const larger = Buffer.allocUnsafe(Math.min(limit.maxBytes + 1, buffer.length * 2));
        buffer.copy(larger, 0, 0, length);
        buffer = larger;
      }
      let read: number;
      try {
        read = readSync(fd, buffer, length, buffer.length - length, null);
      } catch (error) {
        throw refuse(`cannot be read: ${(error as Error).message}`);
      }
      if (read === 0) break;
      length += read;
    }
    return buffer.toString('utf8', 0, length).replace(/^\uFEFF/, '');
  } finally {
    closeSync(fd);
  }
}

const MB = 1024 * 1024;

const bytes = (n: number) => n.toLocaleString('en-US');
