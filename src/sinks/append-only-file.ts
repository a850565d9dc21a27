import { closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { ValidationError } from '../errors/validation-error.ts';
import type { Page } from '../pipeline/page.ts';
import { crashPoint } from '../crash-points.ts';
import type { SinkCheckpoints } from '../state/interfaces.ts';
import { leaseOutput } from '../state/sqlite/lease.ts';
import { claimFile, fileOutputKey, registryPathFor } from '../state/sqlite/output-claims.ts';
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
 *
 * Cutting back is safe only if every byte past the checkpoint is this sink's own: so the file is leased while a run
 * writes it, claimed by its pipeline in the directory's output registry (another pipeline is refused), and known by
 * its identity (a file put in its place is not cut). A file `shared` by pipelines that all say so is never cut back:
 * each appends, at least once.
 */
export function appendOnlyFile(path: string, format: FileFormat, options: { shared?: boolean } = {}): Sink<Item> {
  const id = `${format.kind}:${path}`;
  const shared = options.shared === true;
  let file: { fd: number; checkpoints: SinkCheckpoints } | undefined;
  let lease: ReturnType<typeof leaseOutput> | undefined;
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
    // Shared, other pipelines append too: the file's length is the checkpoint, not what this sink wrote.
    bytes = shared ? fstatSync(fd).size : bytes + buffer.length;
  };

  // Writes the page's bytes; the checkpoint it returns is recorded inside the page's transaction.
  const stage = (page: Page<Item>, seq: number) => {
    const { fd } = ready();
    if (page.items.length > 0) {
      append(fd, format.render(page.items));
      crashPoint('file-before-checkpoint');
    }
    return {
      checkpoint: { seq, bytes },
      committed: () => {
        held = seq;
      },
    };
  };

  return {
    kind: format.kind,
    path,
    id,
    async open(ctx: SinkContext) {
      mkdirSync(dirname(path), { recursive: true });
      // Created readable by its owner only: rows may be confidential (narrowed further by a stricter umask).
      const fd = openSync(path, 'a+', 0o600);
      try {
        const registry = ctx.database(registryPathFor(path));
        lease = leaseOutput(registry, { key: fileOutputKey(path), label: path }, ctx.pipeline);
        const stat = fstatSync(fd, { bigint: true });
        let size = Number(stat.size);
        const identity = { dev: String(stat.dev), ino: String(stat.ino) };
        const before = claimFile(registry, { key: fileOutputKey(path), label: path, kind: format.kind }, { pipeline: ctx.pipeline, state: ctx.statePath, shared }, { ...identity, size });
        const checkpoint = await ctx.stateCheckpoints.get(id);
        held = checkpoint?.seq ?? ctx.currentSeq;
        if (checkpoint?.bytes !== undefined && checkpoint.bytes !== null && size !== 0) {
          if (before && (before.dev !== identity.dev || before.ino !== identity.ino)) {
            throw changedOutside(format.kind, `${path} is not the file this pipeline wrote (another file was put in its place)`);
          }
          if (size < checkpoint.bytes) {
            throw changedOutside(format.kind, `${path} is shorter (${size} bytes) than what was committed to it (${checkpoint.bytes} bytes): it was changed outside webdata-etl`);
          }
          // Bytes past the checkpoint were written but never committed (a crash in between): they go — unless the file
          // is shared, where they may be another pipeline's: then they stay, and the page comes again (at least once).
          if (size > checkpoint.bytes && !shared) {
            ftruncateSync(fd, checkpoint.bytes);
            size = checkpoint.bytes;
          }
        }
        bytes = size;
        const start = format.prepare(ctx, fd, size);
        if (start) append(fd, start);
        await ctx.stateCheckpoints.set(id, { seq: held, bytes });
        file = { fd, checkpoints: ctx.stateCheckpoints };
      } catch (error) {
        closeSync(fd);
        lease?.release();
        lease = undefined;
        throw error;
      }
    },
    held: () => held,
    committedBytes: () => bytes,
    // Outside a run's page transaction (a replay, another runner), the checkpoint follows the write at once.
    async write(page: Page<Item>, seq: number) {
      const staged = stage(page, seq);
      await ready().checkpoints.set(id, staged.checkpoint);
      staged.committed();
    },
    stage,
    delivery: shared ? 'at_least_once' : 'exactly_once',
    async discard(_runId, since) {
      const { fd, checkpoints } = ready();
      // A shared file is never cut: what the abandoned run appended stays (at least once).
      if (!shared && since.bytes !== null && since.bytes < bytes) {
        ftruncateSync(fd, since.bytes);
        bytes = since.bytes;
        await checkpoints.set(id, { seq: held, bytes });
      }
    },
    close() {
      if (file) closeSync(file.fd);
      file = undefined;
      lease?.release();
      lease = undefined;
    },
  };
}

/** A file that changed under the pipeline: bad local input (exit 2), with what to do. */
function changedOutside(kind: string, what: string): ValidationError {
  return new ValidationError('An output file changed outside webdata-etl', [
    { path: `${kind}.path`, message: `${what}. Move it aside to start a new file, or put the original back.` },
  ]);
}
