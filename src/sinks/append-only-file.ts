import { closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Page } from '../pipeline/page.ts';
import { crashPoint } from '../run/crash-points.ts';
import type { SinkCheckpoints } from '../state/checkpoints.ts';
import type { Sink, SinkContext } from './sink.ts';

type Item = Record<string, unknown>;

export interface FileFormat {
  kind: string;
  /**
   * Called once the file holds exactly its committed bytes (`size`): checks that they can be appended to (throw
   * if not), and returns what a new file starts with (a header, a BOM), if anything.
   */
  prepare(ctx: SinkContext, fd: number, size: number): string | undefined;
  /** The text of a page's items. */
  render(items: readonly Item[]): string;
}

/**
 * A file sink that only ever appends, exactly once per page: each page is written synchronously, then the file's
 * committed length is checkpointed in the state store. On the next open, a longer file is cut back to it (bytes
 * written but never committed, a crash in between), a shorter one is refused (changed outside webdata-etl), and
 * the journal re-delivers the pages past the checkpoint. CSV and JSONL share this; they differ only in format.
 */
export function appendOnlyFile(path: string, format: FileFormat): Sink<Item> {
  const id = `${format.kind}:${path}`;
  let file: { fd: number; checkpoints: SinkCheckpoints } | undefined;
  let bytes = 0;
  let held = 0;

  const ready = () => {
    if (!file) throw new Error(`the ${format.kind.toUpperCase()} sink ${path} was not opened`);
    return file;
  };
  const append = (fd: number, text: string) => {
    const buffer = Buffer.from(text, 'utf8');
    let written = 0;
    while (written < buffer.length) written += writeSync(fd, buffer, written);
    bytes += buffer.length;
  };

  // Writes the page's bytes; the checkpoint is recorded by what it returns (inside the page's transaction).
  const stage = (page: Page<Item>, seq: number) => {
    const { fd, checkpoints } = ready();
    if (page.items.length > 0) {
      append(fd, format.render(page.items));
      crashPoint('file-before-checkpoint');
    }
    const committed = bytes;
    return () => {
      checkpoints.set(id, { seq, bytes: committed });
      held = seq;
    };
  };

  return {
    kind: format.kind,
    path,
    id,
    open(ctx: SinkContext) {
      mkdirSync(dirname(path), { recursive: true });
      const fd = openSync(path, 'a+');
      try {
        const checkpoint = ctx.stateCheckpoints.get(id);
        let size = fstatSync(fd).size;
        held = checkpoint?.seq ?? ctx.currentSeq;
        if (checkpoint?.bytes !== undefined && checkpoint.bytes !== null && size !== 0) {
          if (size < checkpoint.bytes) {
            throw new Error(
              `${path} is shorter (${size} bytes) than what was committed to it (${checkpoint.bytes} bytes): it was changed outside webdata-etl. ` +
                'Move it aside to start a new file.',
            );
          }
          // Bytes past the checkpoint were written but never committed (a crash in between): they go.
          if (size > checkpoint.bytes) ftruncateSync(fd, checkpoint.bytes);
          size = checkpoint.bytes;
        }
        bytes = size;
        const start = format.prepare(ctx, fd, size);
        if (start) append(fd, start);
        ctx.stateCheckpoints.set(id, { seq: held, bytes });
        file = { fd, checkpoints: ctx.stateCheckpoints };
      } catch (error) {
        closeSync(fd);
        throw error;
      }
    },
    held: () => held,
    committedBytes: () => bytes,
    // Outside a run's page transaction (a replay, another runner), the checkpoint follows the write at once.
    write: (page: Page<Item>, seq: number) => stage(page, seq)(),
    stage,
    discard(_runId, since) {
      const { fd, checkpoints } = ready();
      if (since.bytes !== null && since.bytes < bytes) {
        ftruncateSync(fd, since.bytes);
        bytes = since.bytes;
        checkpoints.set(id, { seq: held, bytes });
      }
    },
    close() {
      if (file) closeSync(file.fd);
      file = undefined;
    },
  };
}
