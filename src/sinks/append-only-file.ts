import { closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, extname, join } from 'node:path';
import { LeaseHeldError } from '../errors/lease-held-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import type { Page } from '../pipeline/page.ts';
import { crashPoint } from '../crash-points.ts';
import type { Lease, SinkCheckpoints } from '../state/interfaces.ts';
import { leaseOutput } from '../state/sqlite/lease.ts';
import { claimFile, fileOutputKey, registryPathFor } from '../state/sqlite/output-claims.ts';
import { writeAll } from '../commits/append-records.ts';
import type { CsvFormat, Sink, SinkContext, SinkRecords } from './sink.ts';

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
  /** CSV: what `render` writes, as cells and csv-stringify's options, for the commit thread to render. */
  records?: { format: CsvFormat; width(): number; cells(items: readonly Item[], into: string[]): void };
  /** What else decides the rows it writes, beside the file (its columns): see `Sink.terms`. */
  terms?: Readonly<Record<string, unknown>>;
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
export function appendOnlyFile(path: string, format: FileFormat, options: { shared?: boolean; perWorker?: boolean } = {}): Sink<Item> {
  const shared = options.shared === true;
  const perWorker = options.perWorker === true;
  // The file written: `path`, or in a distributed run with `perWorker`, this worker's own file beside it.
  let at = path;
  const idOf = (file: string) => `${format.kind}:${file}`;
  let file: { fd: number; checkpoints: SinkCheckpoints; lease: Lease } | undefined;
  let bytes = 0;
  let held = 0;

  const ready = () => {
    if (!file) throw new Error(`the ${format.kind.toUpperCase()} sink ${path} was not opened`);
    return file;
  };
  const append = (fd: number, text: string) => {
    const length = writeAll(fd, text);
    // Shared, other pipelines append too: the file's length is the checkpoint, not what this sink wrote.
    bytes = shared ? fstatSync(fd).size : bytes + length;
  };

  /**
   * Opens `target` holding its output lease: checks it is the file this pipeline wrote, cuts it back to its
   * committed length, and prepares it for appending. Returns the open file and where it stands.
   */
  const attach = async (ctx: SinkContext, target: string, lease: Lease) => {
    const fd = openSync(target, 'a+', 0o600);
    try {
      const registry = ctx.database(registryPathFor(target));
      const stat = fstatSync(fd, { bigint: true });
      let size = Number(stat.size);
      const identity = { dev: String(stat.dev), ino: String(stat.ino) };
      const before = claimFile(registry, { key: fileOutputKey(target), label: target, kind: format.kind }, { pipeline: ctx.pipeline, state: ctx.statePath, shared }, { ...identity, size });
      const checkpoint = await ctx.stateCheckpoints.get(idOf(target));
      const seq = checkpoint?.seq ?? ctx.currentSeq;
      if (checkpoint?.bytes !== undefined && checkpoint.bytes !== null && size !== 0) {
        if (before && (before.dev !== identity.dev || before.ino !== identity.ino)) {
          throw changedOutside(format.kind, `${target} is not the file this pipeline wrote (another file was put in its place)`);
        }
        if (size < checkpoint.bytes) {
          throw changedOutside(format.kind, `${target} is shorter (${size} bytes) than what was committed to it (${checkpoint.bytes} bytes): it was changed outside webdata-etl`);
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
  };

  /** The file's output lease, in its directory's registry. */
  const leaseFile = (ctx: SinkContext, target: string, whileProcessLives: boolean) =>
    leaseOutput(ctx.database(registryPathFor(target)), { key: fileOutputKey(target), label: target }, ctx.pipeline, { whileProcessLives });

  /** This worker's file: the first of `<name>.<host>-<n><ext>` that no other process on this host writes now. */
  const takeWorkerFile = (ctx: SinkContext): { target: string; lease: Lease } => {
    for (let n = 1; ; n += 1) {
      const target = workerFile(path, n);
      try {
        // A slot whose writer still lives is not taken, even past the lease's renewal: a frozen worker wakes to write.
        return { target, lease: leaseFile(ctx, target, true) };
      } catch (error) {
        if (!(error instanceof LeaseHeldError) || n >= MAX_WORKER_FILES) throw error;
      }
    }
  };

  /**
   * Cuts back the files of this host's workers that are gone (killed between a page's bytes and its commit, whose
   * pages other workers took again, or left past an abandoned run's start by `--fresh`): a file nobody writes now is
   * opened as its worker would, which cuts it to its committed length, and let go.
   */
  const sweep = async (ctx: SinkContext) => {
    for (const target of workerFilesOnThisHost(path)) {
      if (target === at) continue;
      let lease: Lease;
      try {
        // Only a writer whose process is gone: one frozen past the lease's renewal may still commit its page.
        lease = leaseFile(ctx, target, true);
      } catch (error) {
        if (error instanceof LeaseHeldError) continue;
        throw error;
      }
      const { fd } = await attach(ctx, target, lease);
      closeSync(fd);
      await lease.release();
    }
  };

  // Writes the page's bytes; the checkpoint it returns is recorded inside the page's transaction.
  const stage = (page: Page<Item>, seq: number) => {
    const { fd } = ready();
    const start = bytes;
    if (page.items.length > 0) {
      append(fd, format.render(page.items));
      crashPoint('file-before-checkpoint');
    }
    return {
      checkpoint: { seq, bytes },
      committed: () => {
        held = seq;
      },
      abandoned: () => {
        // The page's commit was refused (another worker has its series): its bytes go, as a crash's would. Pages
        // commit one at a time, so nothing was appended after them.
        if (shared || bytes === start) return;
        ftruncateSync(fd, start);
        bytes = start;
      },
    };
  };

  // The page's cells for the commit thread, which appends their text and says how long the file then is.
  const records = (page: Page<Item>, seq: number): SinkRecords => {
    const { fd } = ready();
    const { format: csv, width, cells } = format.records as NonNullable<FileFormat['records']>;
    const values: string[] = [];
    cells(page.items, values);
    return {
      sinkId: idOf(at),
      path: at,
      fd,
      format: csv,
      width: width(),
      cells: values,
      committed: (size) => {
        held = seq;
        bytes = size;
      },
    };
  };

  let context: SinkContext | undefined;
  return {
    kind: format.kind,
    get path() {
      return at;
    },
    get id() {
      return idOf(at);
    },
    perWorker,
    terms: { file: path, perWorker, ...format.terms },
    async open(ctx: SinkContext) {
      mkdirSync(dirname(path), { recursive: true });
      context = ctx;
      const own = perWorker && ctx.shared === true;
      const taken = own ? takeWorkerFile(ctx) : { target: path, lease: leaseFile(ctx, path, false) };
      at = taken.target;
      const { fd, size, seq } = await attach(ctx, at, taken.lease);
      try {
        bytes = size;
        held = seq;
        const start = format.prepare(ctx, fd, size);
        if (start) append(fd, start);
        await ctx.stateCheckpoints.set(idOf(at), { seq: held, bytes });
        if (own) await sweep(ctx);
      } catch (error) {
        closeSync(fd);
        await taken.lease.release();
        throw error;
      }
      file = { fd, checkpoints: ctx.stateCheckpoints, lease: taken.lease };
    },
    held: () => held,
    committedBytes: () => bytes,
    // Outside a run's page transaction (a replay, another runner), the checkpoint follows the write at once.
    async write(page: Page<Item>, seq: number) {
      const staged = stage(page, seq);
      await ready().checkpoints.set(idOf(at), staged.checkpoint);
      staged.committed();
    },
    stage,
    ...(format.records ? { records } : {}),
    delivery: shared ? 'at_least_once' : 'exactly_once',
    async discard(_runId, since, starts) {
      const { fd, checkpoints } = ready();
      // A shared file is never cut: what the abandoned run appended stays (at least once).
      if (!shared && since.bytes !== null && since.bytes < bytes) {
        ftruncateSync(fd, since.bytes);
        bytes = since.bytes;
        await checkpoints.set(idOf(at), { seq: held, bytes });
      }
      if (!perWorker || !context?.shared || !starts) return;
      // The other workers' files: their committed length goes back to where the abandoned run found them, in the
      // state store, so that each is cut back when a worker next opens it (here at once, on this host).
      for (const [sinkId, start] of starts) {
        if (sinkId === idOf(at) || start.bytes === null || !sinkId.startsWith(`${format.kind}:`) || !isWorkerFileOf(path, sinkId.slice(format.kind.length + 1))) continue;
        await checkpoints.set(sinkId, { seq: start.seq, bytes: start.bytes });
      }
      await sweep(context);
    },
    async close() {
      // A worker's last act: the files of this host's workers that died are cut back, so that what is left is exact.
      if (file && perWorker && context?.shared) await sweep(context).catch(() => undefined);
      if (file) {
        closeSync(file.fd);
        await file.lease.release();
      }
      file = undefined;
    },
  };
}

/** How many files one host's workers may have beside a per-worker sink's path. */
const MAX_WORKER_FILES = 1000;

/** The host, as a file name may carry it. */
function hostTag(): string {
  return hostname().replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64) || 'host';
}

/** `results.csv` → `results.<host>-<n>.csv`: the n-th file of this host's workers. */
export function workerFile(path: string, n: number): string {
  const ext = extname(path);
  return join(dirname(path), `${basename(path, ext)}.${hostTag()}-${n}${ext}`);
}

function isWorkerFileOf(path: string, candidate: string): boolean {
  const ext = extname(path);
  const stem = basename(path, ext);
  const name = basename(candidate);
  return dirname(candidate) === dirname(path) && name.startsWith(`${stem}.`) && name.endsWith(ext) && /-\d+$/.test(name.slice(stem.length + 1, name.length - ext.length));
}

/** The files this host's workers wrote beside `path`. */
function workerFilesOnThisHost(path: string): string[] {
  const ext = extname(path);
  const prefix = `${basename(path, ext)}.${hostTag()}-`;
  let names: string[];
  try {
    names = readdirSync(dirname(path));
  } catch {
    return [];
  }
  return names.filter((name) => name.startsWith(prefix) && name.endsWith(ext) && /^\d+$/.test(name.slice(prefix.length, name.length - ext.length))).map((name) => join(dirname(path), name));
}

/** A file that changed under the pipeline: bad local input (exit 2), with what to do. */
function changedOutside(kind: string, what: string): ValidationError {
  return new ValidationError('An output file changed outside webdata-etl', [
    { path: `${kind}.path`, message: `${what}. Move it aside to start a new file, or put the original back.` },
  ]);
}
