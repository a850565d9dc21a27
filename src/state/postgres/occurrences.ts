import { retrying } from '../../postgres/failure.ts';
import type { Pool } from '../../postgres/pools.ts';
import { storable } from '../../postgres/storable.ts';
import type { OccurrenceClaim, OccurrenceOutcome, OccurrenceRecord, StateStore } from '../interfaces.ts';
import { occurrenceRecordFrom } from '../rows.ts';
import type { stateStatements } from './statements.ts';

/** What the occurrences need of the store: its pool, its statements, and where it is (for errors). */
interface Parts {
  pool: Pool;
  sql: ReturnType<typeof stateStatements>;
  where: string;
}

type Occurrences = Pick<StateStore, 'claimOccurrence' | 'storeClock' | 'settleOccurrence' | 'occurrences' | 'pruneOccurrences'>;

/**
 * A schedule's occurrences in PostgreSQL (docs/design.md#schedules): claimed once, by the server's clock
 * (docs/schedules.md#clocks). Every statement is tried again when the server went away, but the claim (below).
 */
export function postgresOccurrences({ pool, sql, where }: Parts): Occurrences {
  const query = async <R extends object = Record<string, unknown>>(text: string, values: unknown[]): Promise<R[]> =>
    retrying(where, async () => (await pool.query<R>(text, values.map(storable))).rows, { idempotent: true });
  return {
    async claimOccurrence(claim: { pipeline: string; dueAt: string; outcome: OccurrenceOutcome; worker: string; note?: string | null }): Promise<OccurrenceClaim> {
      // Tried again only when the statement never reached the server: a lost answer may hide a claim that took, and
      // claiming again would then answer `taken` to the claimant itself. A claim left unanswered stays `claimed`.
      const { rows } = await retrying(
        where,
        () => pool.query<{ store_time: Date; in_time: boolean; won: boolean }>(sql.claimOccurrence, [claim.pipeline, claim.dueAt, claim.outcome, claim.worker, claim.note ?? null].map(storable)),
        { idempotent: false },
      );
      const row = rows[0] as { store_time: Date; in_time: boolean; won: boolean };
      return { result: !row.in_time ? 'ahead' : row.won ? 'won' : 'taken', storeTime: row.store_time.getTime() };
    },
    async storeClock(): Promise<number> {
      const [row] = await query<{ store_time: Date }>(sql.storeClock, []);
      return (row as { store_time: Date }).store_time.getTime();
    },
    async settleOccurrence(pipeline: string, dueAt: string, settled: { outcome: OccurrenceOutcome; runId?: string | null; note?: string | null }): Promise<void> {
      await query(sql.settleOccurrence, [pipeline, dueAt, settled.outcome, settled.runId !== undefined, settled.runId ?? null, settled.note !== undefined, settled.note ?? null]);
    },
    async occurrences(pipeline: string, options: { limit?: number; dueBy?: string; runId?: string; dueAt?: string } = {}): Promise<OccurrenceRecord[]> {
      const rows =
        options.dueAt !== undefined
          ? await query(sql.occurrenceAt, [pipeline, options.dueAt])
          : options.runId !== undefined
            ? await query(sql.occurrenceOfRun, [pipeline, options.runId])
            : await query(sql.occurrences, [pipeline, options.limit ?? null, options.dueBy ?? null]);
      return rows.map(occurrenceRecordFrom);
    },
    async pruneOccurrences(pipeline: string, keep: number): Promise<void> {
      await query(sql.pruneOccurrences, [pipeline, keep]);
    },
  };
}
