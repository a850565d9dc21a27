import { fstatSync, ftruncateSync, writeSync } from 'node:fs';
import { crashPoint } from '../crash-points.ts';
import { csvText } from './csv-text.ts';
import type { FileAppend } from './page-writes.ts';

/**
 * Appends a page's content to its sink's open file and returns the file's length after it: the checkpoint the page's
 * transaction records. The file's length, not a count of what was written: a file shared with other pipelines grows by
 * their appends too. A failure names the file (a write to a descriptor does not), so that a full disk says which one to
 * make room on.
 */
export function appendToFile(file: FileAppend): { length: number; written: number } {
  const { path, fd, content } = file;
  try {
    const text = 'text' in content ? content.text : content.cells.length > 0 ? csvText(content.cells, content.width, content.csv) : '';
    const written = text.length > 0 ? writeAll(fd, text) : 0;
    // Where a file sink's write stops too: its bytes appended, their checkpoint not yet committed.
    if (written > 0) crashPoint('file-before-checkpoint');
    return { length: fstatSync(fd).size, written };
  } catch (error) {
    if (typeof error === 'object' && error !== null && !('path' in error)) Object.assign(error, { path });
    throw error;
  }
}

/**
 * A page's files appended just before its transaction: the length of each after it (in their order), and how to take
 * them back when the store knows that the transaction did not take the page (another worker has its series) — each
 * cut back to where it was, but a file shared with other pipelines, which is never cut.
 */
export function appendFiles(files: readonly FileAppend[]): { lengths: number[]; takeBack(): void } {
  const appended = files.map((file) => ({ file, ...appendToFile(file) }));
  return {
    lengths: appended.map(({ length }) => length),
    takeBack() {
      for (const { file, length, written } of appended.toReversed()) if (!file.shared && written > 0) ftruncateSync(file.fd, length - written);
    },
  };
}

/** Writes all of `text` at the file's end (a write may take less than it is given); returns the bytes written. */
export function writeAll(fd: number, text: string): number {
  const buffer = Buffer.from(text, 'utf8');
  let written = 0;
  while (written < buffer.length) written += writeSync(fd, buffer, written);
  return buffer.length;
}
