import { closeSync, readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, extname, join } from 'node:path';
import { LeaseHeldError } from '../errors/lease-held-error.ts';
import type { Lease } from '../state/interfaces.ts';
import { type FileSinkKind, leaseFile, openAtCommitted } from './committed-file.ts';
import type { SinkContext } from './sink.ts';

/** How many files one host's workers may have beside a per-worker sink's path. */
const MAX_WORKER_FILES = 1000;

/** This worker's file: the first of `<name>.<host>-<n><ext>` that no other process on this host writes now. */
export function takeWorkerFile(ctx: SinkContext, path: string): { target: string; lease: Lease } {
  for (let n = 1; ; n += 1) {
    const target = workerFile(path, n);
    try {
      // A slot whose writer still lives is not taken, even past the lease's renewal: a frozen worker wakes to write.
      return { target, lease: leaseFile(ctx, target, true) };
    } catch (error) {
      if (!(error instanceof LeaseHeldError) || n >= MAX_WORKER_FILES) throw error;
    }
  }
}

/**
 * Cuts back the files of this host's workers that are gone (killed between a page's bytes and its commit, whose
 * pages other workers took again, or left past an abandoned run's start by `--fresh`): a file nobody writes now is
 * opened as its worker would, which cuts it to its committed length, and let go. `own` is this worker's file.
 */
export async function sweepWorkerFiles(ctx: SinkContext, path: string, own: string, sink: FileSinkKind): Promise<void> {
  for (const target of workerFilesOnThisHost(path)) {
    if (target === own) continue;
    let lease: Lease;
    try {
      // Only a writer whose process is gone: one frozen past the lease's renewal may still commit its page.
      lease = leaseFile(ctx, target, true);
    } catch (error) {
      if (error instanceof LeaseHeldError) continue;
      throw error;
    }
    const { fd } = await openAtCommitted(ctx, target, lease, sink);
    closeSync(fd);
    await lease.release();
  }
}

/** The host, as a file name may carry it. */
function hostTag(): string {
  return hostname().replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64) || 'host';
}

/** `results.csv` → `results.<host>-<n>.csv`: the n-th file of this host's workers. */
export function workerFile(path: string, n: number): string {
  const ext = extname(path);
  return join(dirname(path), `${basename(path, ext)}.${hostTag()}-${n}${ext}`);
}

/** Whether `candidate` is a worker's file beside `path`, on any host. */
export function isWorkerFileOf(path: string, candidate: string): boolean {
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
