import type Database from 'better-sqlite3';
import type { DedupeWrites, SeenKeyStore } from '../interfaces.ts';
import { pendingKeys } from '../pending-keys.ts';
import { DEDUPE_SQL } from './statements.ts';

/**
 * Dedupe state for the scopes `query` and `global` and for `persistent` dedupe, in an indexed table of the state store
 * rather than in memory, so that a run's memory does not grow with the keys it has seen (docs/design.md#dedupe-state;
 * what 10 M keys cost: docs/benchmarks.md#figures-the-code-cites).
 */
export function dedupeTables(db: Database.Database) {
  db.exec(DEDUPE_SQL.tables);
  const lookup = db.prepare(DEDUPE_SQL.lookup).pluck();
  const insertKey = db.prepare(DEDUPE_SQL.insertKey);
  const insertSighting = db.prepare(DEDUPE_SQL.insertSighting);
  const forgetRun = db.prepare(DEDUPE_SQL.forgetRun);
  const forgetFinished = db.prepare(DEDUPE_SQL.forgetFinished);
  return {
    /** Run-scoped keys of runs that finished (or were abandoned): nobody resumes them. */
    forgetFinished: () => void forgetFinished.run(),
    has: (scope: string, key: string) => lookup.get(scope, key) !== undefined,
    /** What pages added: call inside the page's transaction. */
    write(writes: DedupeWrites, runId: string): void {
      for (const k of writes.keys) insertKey.run(k.scope, k.key, k.runId);
      for (const s of writes.sightings) {
        insertSighting.run(runId, s.key, s.query, s.country, s.lang, s.page, s.position, s.rank, s.fetchedAt, s.first ? 1 : 0);
      }
    },
    /** A finished run's own keys are no longer needed (persistent ones stay). */
    forgetRun: (runId: string) => void forgetRun.run(runId),
  };
}

/** A run's view of the dedupe tables: what its pages add waits for their commit (see `pendingKeys`). */
export function seenKeys(tables: ReturnType<typeof dedupeTables>, runId: string): SeenKeyStore {
  return pendingKeys(runId, {
    has: async (scope, keys) => keys.filter((key) => tables.has(scope, key)),
    forgetRun: async () => tables.forgetRun(runId),
  });
}
