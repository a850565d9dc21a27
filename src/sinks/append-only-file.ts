import { closeSync, fstatSync, ftruncateSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Page } from '../pipeline/page.ts';
import type { Checkpoint, Lease, SinkCheckpoints } from '../state/interfaces.ts';
import { writeAll } from '../commits/file-appends.ts';
import { fileSinkId, type FileSinkKind, leaseFile, openAtCommitted } from './committed-file.ts';
import { isWorkerFileOf, sweepWorkerFiles, takeWorkerFile } from './worker-files.ts';
import type { FileAppend, FileContent, Sink, SinkContext } from './sink.ts';

export { workerFile } from './worker-files.ts';

type Item = Record<string, unknown>;

export interface FileFormat {
  kind: string;
  /**
   * Called once the file holds exactly its committed bytes (`size`): checks that they can be appended to (throw
   * if not), and returns what a new file starts with (a header, a BOM), if anything.
   */
  prepare(ctx: SinkContext, fd: number, size: number): string | undefined;
  /** What a page's items append: their text, or CSV cells (rendered where they are appended: the commit thread). */
  content(items: readonly Item[]): FileContent;
  /** What else decides the rows it writes, beside the file (its columns): see `Sink.terms`. */
  terms?: Readonly<Record<string, unknown>>;
}

/**
 * A file sink that only ever appends, exactly once per page: the state store appends each page's bytes just before the
 * page's transaction, which records the file's new length as its checkpoint (docs/design.md#the-commit-contract). On
 * the next open, a longer file is cut back to it (bytes
 * written but never committed, a crash in between), a shorter one is refused (changed outside webdata-etl), and
 * the journal re-delivers the pages past the checkpoint. CSV and JSONL share this; they differ only in format.
 *
 * Cutting back is safe only if every byte past the checkpoint is this sink's own: so the file is leased while a run
 * writes it, claimed by its pipeline in the directory's output registry (another pipeline is refused), and known by
 * its identity (a file put in its place is not cut). A file `shared` by pipelines that all say so is never cut back:
 * each appends, at least once.
 */
export function appendOnlyFile(path: string, format: FileFormat, options: { shared?: boolean; perWorker?: boolean } = {}): Sink<Item> {
  const file = new AppendOnlyFile(path, format, options);
  const perWorker = options.perWorker === true;
  return {
    kind: format.kind,
    get path() {
      return file.path;
    },
    get id() {
      return file.id;
    },
    perWorker,
    terms: { file: path, perWorker, ...format.terms },
    commits: {
      kind: 'append',
      append: (page: Page<Item>) => file.append(page),
      committed: (checkpoint: Checkpoint) => file.committed(checkpoint),
    },
    open: (ctx: SinkContext) => file.open(ctx),
    held: () => file.held,
    committedBytes: () => file.bytes,
    delivery: options.shared === true ? 'at_least_once' : 'exactly_once',
    discard: (runId, since, starts) => file.discard(runId, since, starts),
    close: () => file.close(),
  };
}

/** The file from `open` to `close`: its descriptor, where its checkpoints are kept, its output lease. */
interface OpenFile {
  fd: number;
  checkpoints: SinkCheckpoints;
  lease: Lease;
}

/** The append-only file behind the sink: where it is, how much of it is committed, and the run that writes it. */
class AppendOnlyFile {
  /** The sink's path as given: the file, or where the per-worker files go beside. */
  readonly #path: string;
  readonly #format: FileFormat;
  readonly #sink: FileSinkKind;
  readonly #perWorker: boolean;
  // The file written: `path`, or in a distributed run with `perWorker`, this worker's own file beside it.
  #file: string;
  #handle: OpenFile | undefined;
  /** The file's length as this sink wrote it (a shared file's whole length): what its checkpoint records. */
  #bytes = 0;
  /** The sequence number of the last page the file holds. */
  #held = 0;
  /** The run that opened it: a per-worker sink sweeps this host's files with it when it discards or closes. */
  #context: SinkContext | undefined;

  constructor(path: string, format: FileFormat, options: { shared?: boolean; perWorker?: boolean }) {
    this.#path = path;
    this.#format = format;
    this.#sink = { kind: format.kind, shared: options.shared === true };
    this.#perWorker = options.perWorker === true;
    this.#file = path;
  }

  get path(): string {
    return this.#file;
  }

  get id(): string {
    return fileSinkId(this.#format.kind, this.#file);
  }

  get held(): number {
    return this.#held;
  }

  get bytes(): number {
    return this.#bytes;
  }

  async open(ctx: SinkContext): Promise<void> {
    mkdirSync(dirname(this.#path), { recursive: true });
    this.#context = ctx;
    const ownFile = this.#perWorker && ctx.shared === true;
    const taken = ownFile ? takeWorkerFile(ctx, this.#path) : { target: this.#path, lease: leaseFile(ctx, this.#path, false) };
    this.#file = taken.target;
    const { fd, size, seq } = await openAtCommitted(ctx, this.#file, taken.lease, this.#sink);
    try {
      this.#bytes = size;
      this.#held = seq;
      const opening = this.#format.prepare(ctx, fd, size);
      if (opening) this.#append(fd, opening);
      await ctx.stateCheckpoints.set(this.id, { seq: this.#held, bytes: this.#bytes });
      if (ownFile) await this.#sweep(ctx);
    } catch (error) {
      closeSync(fd);
      await taken.lease.release();
      throw error;
    }
    this.#handle = { fd, checkpoints: ctx.stateCheckpoints, lease: taken.lease };
  }

  // The page's bytes as data: the state store appends them just before the page's transaction, which records the
  // file's length after them (docs/design.md#the-commit-contract).
  append(page: Page<Item>): FileAppend {
    const { fd } = this.#ready();
    return { sinkId: this.id, path: this.#file, fd, shared: this.#sink.shared, content: this.#format.content(page.items) };
  }

  committed(checkpoint: Checkpoint): void {
    this.#held = checkpoint.seq;
    // Later pages may be appended before this one's commit is known: the length only moves on.
    if (checkpoint.bytes !== null && checkpoint.bytes > this.#bytes) this.#bytes = checkpoint.bytes;
  }

  async discard(_runId: string, since: { seq: number; bytes: number | null }, starts?: ReadonlyMap<string, { seq: number; bytes: number | null }>): Promise<void> {
    const { fd, checkpoints } = this.#ready();
    // A shared file is never cut: what the abandoned run appended stays (at least once).
    if (!this.#sink.shared && since.bytes !== null && since.bytes < this.#bytes) {
      ftruncateSync(fd, since.bytes);
      this.#bytes = since.bytes;
      await checkpoints.set(this.id, { seq: this.#held, bytes: this.#bytes });
    }
    const context = this.#context;
    if (!this.#perWorker || !context?.shared || !starts) return;
    // The other workers' files: their committed length goes back to where the abandoned run found them, in the
    // state store, so that each is cut back when a worker next opens it (here at once, on this host).
    const { kind } = this.#format;
    for (const [sinkId, start] of starts) {
      if (sinkId === this.id || start.bytes === null || !sinkId.startsWith(`${kind}:`) || !isWorkerFileOf(this.#path, sinkId.slice(kind.length + 1))) continue;
      await checkpoints.set(sinkId, { seq: start.seq, bytes: start.bytes });
    }
    await this.#sweep(context);
  }

  async close(): Promise<void> {
    const handle = this.#handle;
    // A worker's last act: the files of this host's workers that died are cut back, so that what is left is exact.
    if (handle && this.#perWorker && this.#context?.shared) await this.#sweep(this.#context).catch(() => undefined);
    if (handle) {
      closeSync(handle.fd);
      await handle.lease.release();
    }
    this.#handle = undefined;
  }

  #ready(): OpenFile {
    if (!this.#handle) throw new Error(`the ${this.#format.kind.toUpperCase()} sink ${this.#path} was not opened`);
    return this.#handle;
  }

  #append(fd: number, text: string): void {
    const length = writeAll(fd, text);
    // Shared, other pipelines append too: the file's length is the checkpoint, not what this sink wrote.
    this.#bytes = this.#sink.shared ? fstatSync(fd).size : this.#bytes + length;
  }

  /** The files of this host's workers that are gone, cut back (see `sweepWorkerFiles`). */
  #sweep(ctx: SinkContext): Promise<void> {
    return sweepWorkerFiles(ctx, this.#path, this.#file, this.#sink);
  }
}
