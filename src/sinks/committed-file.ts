import { closeSync, fstatSync, ftruncateSync, openSync } from 'node:fs';
import { ValidationError } from '../errors/validation-error.ts';
import type { Lease } from '../state/interfaces.ts';
import { leaseOutput } from '../state/sqlite/lease.ts';
import { claimFile, fileOutputKey, registryPathFor } from '../state/sqlite/output-claims.ts';
import type { SinkContext } from './sink.ts';

/** Which append-only file sink a file belongs to: its kind (`csv`, `jsonl`), and whether pipelines share it. */
export interface FileSinkKind {
  readonly kind: string;
  readonly shared: boolean;
}

/** A file sink's id, under which its checkpoint is kept: its kind and its file. */
export function fileSinkId(kind: string, file: string): string {
  return `${kind}:${file}`;
}

/** The file's output lease, in its directory's registry. */
export function leaseFile(ctx: SinkContext, target: string, whileProcessLives: boolean): Lease {
  return leaseOutput(ctx.database(registryPathFor(target)), { key: fileOutputKey(target), label: target }, ctx.pipeline, { whileProcessLives });
}

/**
 * Opens `target` holding its output lease: checks it is the file this pipeline wrote, cuts it back to its
 * committed length, and prepares it for appending. Returns the open file and where it stands. On failure the file
 * is closed and the lease let go.
 */
export async function openAtCommitted(ctx: SinkContext, target: string, lease: Lease, sink: FileSinkKind): Promise<{ fd: number; size: number; seq: number }> {
  const { kind, shared } = sink;
  const fd = openSync(target, 'a+', 0o600);
  try {
    const registry = ctx.database(registryPathFor(target));
    const stat = fstatSync(fd, { bigint: true });
    let size = Number(stat.size);
    const identity = { dev: String(stat.dev), ino: String(stat.ino) };
    const before = claimFile(registry, { key: fileOutputKey(target), label: target, kind }, { pipeline: ctx.pipeline, state: ctx.statePath, shared }, { ...identity, size });
    const checkpoint = await ctx.stateCheckpoints.get(fileSinkId(kind, target));
    const seq = checkpoint?.seq ?? ctx.currentSeq;
    if (checkpoint?.bytes !== undefined && checkpoint.bytes !== null && size !== 0) {
      if (before && (before.dev !== identity.dev || before.ino !== identity.ino)) {
        throw changedOutside(kind, `${target} is not the file this pipeline wrote (another file was put in its place)`);
      }
      if (size < checkpoint.bytes) {
        throw changedOutside(kind, `${target} is shorter (${size} bytes) than what was committed to it (${checkpoint.bytes} bytes): it was changed outside webdata-etl`);
      }
      // Bytes past the checkpoint were written but never committed (a crash in between): they go — unless the file
      // is shared, where they may be another pipeline's: then they stay, and the page comes again (at least once).
      if (size > checkpoint.bytes && !shared) {
        ftruncateSync(fd, checkpoint.bytes);
        size = checkpoint.bytes;
      }
    }
    return { fd, size, seq };
  } catch (error) {
    closeSync(fd);
    await lease.release();
    throw error;
  }
}

/** A file that changed under the pipeline: bad local input (exit 2), with what to do. */
function changedOutside(kind: string, what: string): ValidationError {
  return new ValidationError('An output file changed outside webdata-etl', [
    { path: `${kind}.path`, message: `${what}. Move it aside to start a new file, or put the original back.` },
  ]);
}
