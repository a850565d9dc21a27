import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { RunSummary } from '../../src/index.ts';
import { TEST_KEY } from '../helpers.ts';
import { csvRows, sqliteRows } from '../pipeline-helpers.ts';

/** Every crash point, each at the page it kills on: the matrix a store and its sinks must resume from. */
export const CRASH_MATRIX = [
  ['page-transaction', 5],
  ['after-commit', 7],
  ['file-before-checkpoint', 6],
  ['between-sinks', 9],
] as const;

export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  summary: RunSummary | undefined;
  stderr: string;
  /** Page events seen (committed pages of this invocation). */
  pages: number;
  replayed: number | undefined;
}

/**
 * Runs test/fixtures/run-pipeline.ts in a child process with the given spec. A test that signals it does so once the
 * run is where it needs it and cannot move on (held by the simulator's gate, or at a crash point), never after a
 * guessed time: a loaded machine starts processes and runs pages at any speed.
 */
export function runChild(spec: Record<string, unknown>, env: Record<string, string> = {}) {
  const { WEBDATA_CRASH_AT: _ignored, ...inherited } = process.env;
  const child: ChildProcess = spawn(process.execPath, ['test/fixtures/run-pipeline.ts'], {
    env: { ...inherited, WEBDATA_API_KEY: TEST_KEY, WEBDATA_TEST_SPEC: JSON.stringify(spec), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let pages = 0;
  let replayed: number | undefined;
  let closed = false;
  const watchers = new Set<() => void>();
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    const from = stderr.lastIndexOf('\n') + 1;
    stderr += chunk.toString();
    // Whole lines only: a read can end inside a line.
    for (const line of stderr.slice(from, stderr.lastIndexOf('\n') + 1).split('\n')) {
      if (line.startsWith('{"type":"page"')) pages += 1;
      if (line.startsWith('{"type":"start"')) replayed = (JSON.parse(line) as { replayed: number }).replayed;
    }
    for (const watch of watchers) watch();
  });
  // 'close', not 'exit': at 'exit' the last of stdout (the summary) may not have been read yet.
  const done = new Promise<ChildResult>((resolve, reject) => {
    child.on('close', (code, signal) => {
      closed = true;
      for (const watch of watchers) watch();
      if ((stdout + stderr).includes(TEST_KEY)) return reject(new Error('a pipeline run printed the API key'));
      const line = stdout.trim().split('\n').at(-1);
      resolve({ code, signal, summary: line ? (JSON.parse(line) as RunSummary) : undefined, stderr, pages, replayed });
    });
  });
  /** Resolves once `reached()` holds, checked at each line of stderr (and at the end). */
  const when = (reached: () => boolean) =>
    new Promise<void>((resolve) => {
      const watch = () => {
        if (!reached()) return;
        watchers.delete(watch);
        resolve();
      };
      watchers.add(watch);
      watch();
    });
  /** `promise`, or a rejection with the child's output if it ends first (instead of a wait until the test's timeout). */
  const whileRunning = <T>(promise: Promise<T>): Promise<T> =>
    Promise.race([
      promise,
      done.then((result) => {
        throw new Error(`the pipeline ended (exit ${result.code}, ${result.signal ?? 'no signal'}) before the test could act on it:\n${result.stderr}`);
      }),
    ]);
  return {
    child,
    done,
    whileRunning,
    /** Resolves once the child has committed `count` pages, or has exited (whatever it committed). */
    pagesCommitted: (count: number) => when(() => pages >= count || closed),
    /** Resolves once stderr shows `text`; rejects if the child ends first. */
    printed: (text: string) => whileRunning(when(() => stderr.includes(text))),
    /** What it printed on stderr so far. */
    stderr: () => stderr,
  };
}

/** The columns that do not depend on when the run happened. */
const STABLE = ['query', 'country', 'lang', 'page', 'position', 'rank', 'title', 'url', 'domain', 'snippet', 'dedupe_key'];

const pick = (row: Record<string, unknown>, columns: readonly string[]) => JSON.stringify(columns.map((c) => row[c] ?? null));

/** Rows in a stable order, without run_id and fetched_at: what two runs of the same plan must agree on. */
export function stableSqlite(path: string): string[] {
  return sqliteRows(path)
    .map((row) => pick(row, [...STABLE, 'raw']))
    .sort();
}

export function stableCsv(path: string): string[] {
  if (!existsSync(path)) return [];
  return csvRows(path)
    .map((row) => pick(Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v === '' ? null : /^\d+$/.test(v) && ['page', 'position', 'rank'].includes(k) ? Number(v) : v])), STABLE))
    .sort();
}

/**
 * JSON Lines rows in a stable order, with the stable columns (and `raw`, nested as served, as JSON text). Every
 * line must parse: a broken or joined line throws.
 */
export function stableJsonl(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const row = JSON.parse(line) as Record<string, unknown>;
      return pick({ ...row, raw: row.raw === undefined ? null : JSON.stringify(row.raw) }, [...STABLE, 'raw']);
    })
    .sort();
}

/** Seeded delays, so that a failure at a "random" moment can be reproduced. */
export function delays(seed: number) {
  let state = seed >>> 0;
  return (min: number, max: number) => {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return min + (state % (max - min + 1));
  };
}
