import type Database from 'better-sqlite3';
import { CLAIM_AHEAD_TOLERANCE_MS, type OccurrenceStore } from '../occurrence-store.ts';
import { occurrenceRecordFrom } from '../rows.ts';
import { occurrenceStatements } from './statements.ts';

/**
 * A schedule's occurrences in a SQLite state file (docs/design.md#schedules), claimed once, never ahead of the store's
 * clock (docs/schedules.md#clocks). SQLite has no server clock: the store's is `clock` (this machine's unless a test
 * gives its own), read here, which every worker of a SQLite pipeline shares (a file is one machine's), whatever clock
 * a worker's loop keeps.
 */
export function sqliteOccurrences(db: Database.Database, clock: () => number): OccurrenceStore {
  const statements = occurrenceStatements(db);
  return {
    async claimOccurrence(claim) {
      const storeTime = clock();
      if (Date.parse(claim.dueAt) > storeTime + CLAIM_AHEAD_TOLERANCE_MS) return { result: 'ahead', storeTime };
      const won = statements.claimOccurrence.run(claim.pipeline, claim.dueAt, claim.outcome, claim.worker, new Date(storeTime).toISOString(), claim.note ?? null).changes === 1;
      return { result: won ? 'won' : 'taken', storeTime };
    },
    storeClock: async () => clock(),
    async settleOccurrence(pipeline, dueAt, settled) {
      statements.settleOccurrence.run({
        pipeline,
        dueAt,
        outcome: settled.outcome,
        keepRun: settled.runId === undefined ? 1 : 0,
        runId: settled.runId ?? null,
        keepNote: settled.note === undefined ? 1 : 0,
        note: settled.note ?? null,
      });
    },
    async occurrences(pipeline, options = {}) {
      const dueBy = options.dueBy === undefined ? null : new Date(options.dueBy).toISOString();
      const rows =
        options.dueAt !== undefined
          ? statements.occurrenceAt.all(pipeline, new Date(options.dueAt).toISOString())
          : options.runId !== undefined
            ? statements.occurrenceOfRun.all(pipeline, options.runId)
            : statements.occurrences.all({ pipeline, dueBy, limit: options.limit ?? -1 });
      return (rows as Record<string, unknown>[]).map(occurrenceRecordFrom);
    },
    async pruneOccurrences(pipeline, keep) {
      statements.pruneOccurrences.run({ pipeline, keep });
    },
  };
}
