import { retrying } from '../../postgres/failure.ts';
import { storable } from '../../postgres/storable.ts';
import type { OccurrenceStore } from '../occurrence-store.ts';
import { occurrenceRecordFrom } from '../rows.ts';
import { occurrenceStatements } from './statements.ts';
import { type StoreParts, storeQuery } from './store-parts.ts';

/**
 * A schedule's occurrences in PostgreSQL (docs/design.md#schedules): claimed once, by the server's clock
 * (docs/schedules.md#clocks). Every statement is tried again when the server went away, but the claim (below).
 */
export function postgresOccurrences(parts: StoreParts): OccurrenceStore {
  const sql = occurrenceStatements(parts.s);
  return {
    async claimOccurrence(claim) {
      // Tried again only when the statement never reached the server: a lost answer may hide a claim that took, and
      // claiming again would then answer `taken` to the claimant itself. A claim left unanswered stays `claimed`.
      const { rows } = await retrying(
        parts.where,
        () => parts.pool.query<{ store_time: Date; in_time: boolean; won: boolean }>(sql.claimOccurrence, [claim.pipeline, claim.dueAt, claim.outcome, claim.worker, claim.note ?? null].map(storable)),
        { idempotent: false },
      );
      const row = rows[0] as { store_time: Date; in_time: boolean; won: boolean };
      return { result: !row.in_time ? 'ahead' : row.won ? 'won' : 'taken', storeTime: row.store_time.getTime() };
    },
    async storeClock() {
      const [row] = await storeQuery<{ store_time: Date }>(parts, sql.storeClock);
      return (row as { store_time: Date }).store_time.getTime();
    },
    async settleOccurrence(pipeline, dueAt, settled) {
      await storeQuery(parts, sql.settleOccurrence, [pipeline, dueAt, settled.outcome, settled.runId !== undefined, settled.runId ?? null, settled.note !== undefined, settled.note ?? null]);
    },
    async occurrences(pipeline, options = {}) {
      const rows =
        options.dueAt !== undefined
          ? await storeQuery(parts, sql.occurrenceAt, [pipeline, options.dueAt])
          : options.runId !== undefined
            ? await storeQuery(parts, sql.occurrenceOfRun, [pipeline, options.runId])
            : await storeQuery(parts, sql.occurrences, [pipeline, options.limit ?? null, options.dueBy ?? null]);
      return rows.map(occurrenceRecordFrom);
    },
    async pruneOccurrences(pipeline, keep) {
      await storeQuery(parts, sql.pruneOccurrences, [pipeline, keep]);
    },
  };
}
