import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { expect } from 'vitest';
import { join } from 'node:path';
import { openForReading } from '../src/read-database.ts';
import { parse } from 'csv-parse/sync';
import { type PipelineDefinition, run, type RunOptions } from '../src/index.ts';
import { type Simulator } from '../src/simulator/index.ts';
import { TEST_KEY } from './helpers.ts';

/**
 * A fresh directory for a test's outputs, removed at dispose — after a scan: no file a run left there (databases,
 * their WAL, CSV, JSONL, Parquet, reports, summaries) may hold the test's API key. Every test with outputs is thus a
 * secrets test too.
 */
export function workdir() {
  const dir = mkdtempSync(join(tmpdir(), 'webdata-etl-'));
  return {
    dir,
    path: (name: string) => join(dir, name),
    [Symbol.dispose]() {
      const leaks = filesHolding(dir, TEST_KEY);
      rmSync(dir, { recursive: true, force: true });
      if (leaks.length > 0) throw new Error(`the API key was written to ${leaks.join(', ')}`);
    },
  };
}

/** Files under `dir` whose bytes contain `secret`. */
/** None of `keys` is in what was printed, nor in any file under `dir`: a key is never written anywhere. */
export function noKeyIn(dir: string, printed: string, keys: Iterable<string>): void {
  for (const key of keys) {
    expect(printed).not.toContain(key);
    expect(filesHolding(dir, key)).toEqual([]);
  }
}

export function filesHolding(dir: string, secret: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    let stat: ReturnType<typeof statSync>;
    try {
      stat = statSync(path);
    } catch {
      continue;
    }
    if (stat.isDirectory()) found.push(...filesHolding(path, secret));
    else if (stat.isFile() && fileHolds(path, secret)) found.push(path);
  }
  return found;
}

/** Whether the file's bytes contain `secret`, read in chunks (volume outputs pass the 2 GiB a Buffer can hold). */
function fileHolds(path: string, secret: string): boolean {
  const needle = Buffer.from(secret);
  const chunk = Buffer.alloc(16 * 1024 * 1024 + needle.length);
  const fd = openSync(path, 'r');
  try {
    // Each read keeps the last needle.length - 1 bytes of the one before, so a secret across two chunks is seen.
    let kept = 0;
    for (;;) {
      const read = readSync(fd, chunk, kept, chunk.length - kept, null);
      if (read === 0) return false;
      const filled = kept + read;
      if (chunk.subarray(0, filled).includes(needle)) return true;
      kept = Math.min(needle.length - 1, filled);
      chunk.copy(chunk, 0, filled - kept, filled);
    }
  } finally {
    closeSync(fd);
  }
}

export function runOn(sim: Simulator, pipeline: PipelineDefinition, options: RunOptions = {}) {
  return run(pipeline, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, ...options });
}

export type Row = Record<string, string | number | null>;

/**
 * The rows of `sql` in the database at `path`, read as the command line reads one: a hot journal a killed process
 * left is rolled back first, as the next run would (a plain read-only connection fails on it, which once failed the
 * crash fuzzer's integrity check of a file killed while it was switched to WAL).
 */
export function sqliteRows(path: string, sql = 'SELECT * FROM results ORDER BY rowid'): Row[] {
  const db = openForReading(path);
  try {
    return db.prepare(sql).all() as Row[];
  } finally {
    db.close();
  }
}

export function csvRows(path: string): Record<string, string>[] {
  return parse(readFileSync(path), { columns: true, bom: true, record_delimiter: '\r\n' }) as Record<string, string>[];
}
