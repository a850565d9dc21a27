import type Database from 'better-sqlite3';
import { prunePredicates } from '../prune-statements.ts';
import type { PruneKind } from '../prune.ts';

/** One kind's statements: its rows counted and removed, the table's rows and bytes (for the estimate). */
export interface KindStatements {
  table: string;
  count: Database.Statement;
  remove: Database.Statement;
  rowsOf: Database.Statement;
  bytesOf: Database.Statement;
}

/** What a prune asks of a SQLite state file (`prune.ts`): each kind's rows counted, and removed `@limit` at a time. */
export function pruneStatements(db: Database.Database, kinds: readonly PruneKind[]): { kinds: Map<PruneKind, KindStatements> } & Record<'version' | 'pipelines' | 'runsOf' | 'heldRuns' | 'hasAllowances', Database.Statement> {
  const predicates = prunePredicates('', { run: '@run', pipeline: '@pipeline', before: '@before' });
  const of = (kind: PruneKind): KindStatements => {
    const { table, where } = predicates[kind];
    return {
      count: db.prepare(`SELECT count(*) FROM ${table} WHERE ${where}`).pluck(),
      // One statement, its own transaction: short, so that a run's commits interleave with the batches.
      remove: db.prepare(`DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} WHERE ${where} LIMIT @limit)`),
      rowsOf: db.prepare(`SELECT count(*) FROM ${table}`).pluck(),
      // The table's pages and its indexes' (SQLite's dbstat).
      bytesOf: db.prepare(`SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = ?)`).pluck(),
      table,
    };
  };
  return {
    kinds: new Map(kinds.map((kind) => [kind, of(kind)])),
    version: db.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck(),
    pipelines: db.prepare(`SELECT DISTINCT pipeline FROM runs ORDER BY pipeline`).pluck(),
    runsOf: db.prepare(`SELECT run_id AS runId, status FROM runs WHERE pipeline = ? ORDER BY rowid`),
    heldRuns: db.prepare(`SELECT DISTINCT run_id FROM key_holds`).pluck(),
    hasAllowances: db.prepare(`SELECT 1 FROM key_allowances LIMIT 1`).pluck(),
  };
}

/** Which of the tables are in the file (`sightings` is made by the first run that dedupes across series). */
export const PRUNE_TABLES_SQL = `SELECT name FROM sqlite_master WHERE type = 'table'`;
