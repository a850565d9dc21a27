import { fstatSync, writeSync } from 'node:fs';
import { csvText } from './csv-text.ts';
import type { SinkRecords } from './page-writes.ts';

/**
 * Appends a page's records to their sink's open file (on the commit thread) and returns the file's length after
 * them: the checkpoint the page's transaction records. The file's length, not a count of what was written: a file
 * shared with other pipelines grows by their appends too. A failure names the file (a write to a descriptor does
 * not), so that a full disk says which one to make room on.
 */
export function appendRecords({ path, fd, format, width, cells }: SinkRecords): number {
  try {
    if (cells.length > 0) writeAll(fd, csvText(cells, width, format));
    return fstatSync(fd).size;
  } catch (error) {
    if (typeof error === 'object' && error !== null && !('path' in error)) Object.assign(error, { path });
    throw error;
  }
}

/** Writes all of `text` at the file's end (a write may take less than it is given); returns the bytes written. */
export function writeAll(fd: number, text: string): number {
  const buffer = Buffer.from(text, 'utf8');
  let written = 0;
  while (written < buffer.length) written += writeSync(fd, buffer, written);
  return buffer.length;
}
