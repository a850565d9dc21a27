import { prunePredicates } from '../prune-statements.ts';
import type { PruneKind } from '../prune.ts';

/**
 * What a prune asks of a PostgreSQL state schema (`prune.ts`; `s`, the schema quoted): each kind's rows counted
 * ($1: the run, or for spend the instant before which its rows go; $2: the pipeline), and removed $3 at a time.
 */
export function pruneStatements(s: string) {
  const predicates = prunePredicates(`${s}.`, { run: '$1', pipeline: '$2', before: '$1::timestamptz' });
  const of = (kind: PruneKind) => {
    const { table, where } = predicates[kind];
    return {
      table,
      // $2 is always sent: a condition without it types it as text all the same.
      count: `SELECT count(*)::bigint AS n FROM ${table} WHERE ${where} AND $2::text IS NOT NULL`,
      // One statement, its own transaction: short, so that a run's commits interleave with the batches.
      remove: `DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table} WHERE ${where} AND $2::text IS NOT NULL LIMIT $3)`,
      rowsOf: `SELECT count(*)::bigint AS n FROM ${table}`,
      // The table's size with its indexes and TOAST.
      bytesOf: `SELECT pg_total_relation_size($1::regclass)::bigint AS n`,
    };
  };
  return {
    of,
    version: `SELECT max(version) AS version FROM ${s}.schema_version`,
    schemaExists: 'SELECT 1 FROM pg_namespace WHERE nspname = $1',
    pipelines: `SELECT DISTINCT pipeline FROM ${s}.runs ORDER BY pipeline`,
    runsOf: `SELECT run_id AS "runId", status FROM ${s}.runs WHERE pipeline = $1 ORDER BY created`,
    heldRuns: `SELECT DISTINCT run_id FROM ${s}.key_holds`,
    hasAllowances: `SELECT 1 FROM ${s}.key_allowances LIMIT 1`,
  };
}
