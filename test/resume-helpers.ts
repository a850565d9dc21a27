import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { RunSummary } from '../src/index.ts';
import { TEST_KEY } from './helpers.ts';
import { csvRows, sqliteRows } from './pipeline-helpers.ts';

export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  summary: RunSummary | undefined;
  stderr: string;
  /** Page events seen (committed pages of this invocation). */
  pages: number;
  replayed: number | undefined;
}

/** Runs test/fixtures/run-pipeline.ts in a child process with the given spec. */
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
  const pageWaiters: { count: number; resolve: () => void }[] = [];
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    stderr += text;
    for (const line of text.split('\n')) {
      if (line.startsWith('{"type":"page"')) pages += 1;
      if (line.startsWith('{"type":"start"')) replayed = (JSON.parse(line) as { replayed: number }).replayed;
    }
    for (const waiter of pageWaiters.filter((w) => pages >= w.count)) {
      pageWaiters.splice(pageWaiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  });
  const done = new Promise<ChildResult>((resolve) => {
    child.on('exit', (code, signal) => {
      for (const waiter of pageWaiters.splice(0)) waiter.resolve();
      if ((stdout + stderr).includes(TEST_KEY)) throw new Error('a pipeline run printed the API key');
      const line = stdout.trim().split('\n').at(-1);
      resolve({ code, signal, summary: line ? (JSON.parse(line) as RunSummary) : undefined, stderr, pages, replayed });
    });
  });
  return {
    child,
    done,
    /** Resolves once the child has committed `count` pages (or exited). */
    pagesCommitted: (count: number) => new Promise<void>((resolve) => (pages >= count ? resolve() : pageWaiters.push({ count, resolve }))),
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
