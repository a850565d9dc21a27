import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { parse } from 'csv-parse/sync';
import { readFileSync } from 'node:fs';
import { type PipelineDefinition, run, type RunOptions, type Simulator } from '../src/index.ts';
import { TEST_KEY } from './helpers.ts';

/** A fresh directory for a test's outputs, removed at dispose. */
export function workdir() {
  const dir = mkdtempSync(join(tmpdir(), 'webdata-etl-'));
  return {
    dir,
    path: (name: string) => join(dir, name),
    [Symbol.dispose]() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function runOn(sim: Simulator, pipeline: PipelineDefinition, options: RunOptions = {}) {
  return run(pipeline, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, ...options });
}

export type Row = Record<string, string | number | null>;

export function sqliteRows(path: string, sql = 'SELECT * FROM results ORDER BY rowid'): Row[] {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(sql).all() as Row[];
  } finally {
    db.close();
  }
}

export function csvRows(path: string): Record<string, string>[] {
  return parse(readFileSync(path), { columns: true, bom: true, record_delimiter: '\r\n' }) as Record<string, string>[];
}
