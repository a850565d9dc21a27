import type Database from 'better-sqlite3';
import { migrate } from './schema.ts';
import { stateStatements } from './statements.ts';
import { CLAIM_AHEAD_TOLERANCE_MS, type JournalEntry, type JournalWrite, type NotificationKey, type NotificationRecord, type OccurrenceClaim, type OccurrenceOutcome, type OccurrenceRecord, type PageCommit, type RunRecord, type SeriesEndRecord, type SeriesIdentity, type SeriesProgress, type SeriesStatus, type SeriesTotals, type SpendRow } from '../interfaces.ts';
import { pageTransaction } from './page-transaction.ts';
import { sinkCheckpoints } from './checkpoints.ts';
import { acquireLease } from './lease.ts';
import { dedupeTables } from './seen-keys.ts';
import { failedSeriesFrom, journalEntryFrom, notificationFrom, occurrenceRecordFrom, runRecordFrom, seriesProgressFrom } from '../rows.ts';

/**
 * The run-state tables in SQLite (docs/design.md#the-state-store): one database per pipeline, the SQLite sink's own
 * when there is one, so that a page's rows and its state commit in one transaction. They hold runs, series progress and
 * stage state, the page journal, the spend ledger and the lease. Synchronous, as better-sqlite3 is: `sqliteStateStore`
 * puts them behind the asynchronous `StateStore` the runner knows; tests and tools that build a store by hand use them
 * as is. `clock` is the store's clock, milliseconds since the epoch (default this machine's; tests give theirs).
 */
export function openStateStore(db: Database.Database, clock: () => number = Date.now) {
  migrate(db);
  const statements = stateStatements(db);

  const checkpoints = sinkCheckpoints(db);
  const dedupe = dedupeTables(db);
  const journal = (entry: JournalWrite) => {
    statements.insertPage.run(entry.seq, entry.runId, entry.pageKey, entry.seriesId, entry.number, entry.meta, entry.output, entry.raw, new Date().toISOString());
  };
  const spend = (row: SpendRow) => {
    statements.insertSpend.run(row.runId, row.at, row.seriesId, row.path, row.attempt, row.status, row.credits, row.uncertain ? 1 : 0, row.latencyMs, row.uncommitted ? 1 : 0);
  };
  const commitPage = pageTransaction(db, { statements, checkpoints, dedupe, journal, spend });
  return {
    db: db as Database.Database,
    path: db.name,
    lease: (pipeline: string) => acquireLease(db, pipeline),
    checkpoints,
    dedupe,

    startRun(run: { runId: string; pipeline: string; startedAt: string; fingerprint: string; plan: unknown; budget: number | null; terms?: unknown }): void {
      // Run-scoped dedupe keys a finished run left behind (it forgets them as it finishes; a failure there leaves them).
      dedupe.forgetFinished();
      statements.insertRun.run(run.runId, run.pipeline, run.startedAt, run.fingerprint, JSON.stringify(run.plan), run.budget, run.terms === undefined ? null : JSON.stringify(run.terms));
    },
    reopenRun(runId: string, budget: number | null, terms?: unknown): void {
      statements.reopenRun.run(budget, terms === undefined ? null : JSON.stringify(terms), runId);
    },
    finishRun(runId: string, status: string, finishedAt: string, summary: unknown, error?: string): void {
      statements.finishRun.run(status, finishedAt, summary === undefined ? null : JSON.stringify(summary), error ?? null, runId);
    },
    latestRun(pipeline: string): RunRecord | undefined {
      const row = statements.latestRun.get(pipeline) as Record<string, unknown> | undefined;
      return row && runRecordFrom(row);
    },
    runs(pipeline: string): RunRecord[] {
      return (statements.runsOf.all(pipeline) as Record<string, unknown>[]).map(runRecordFrom);
    },
    /** Abandons an unfinished run (`--fresh`): its journal and series go; its spend stays (it was paid). */
    abandonRun(runId: string, at: string): void {
      db.transaction(() => {
        statements.dropRunPages.run(runId);
        statements.dropRunSeries.run(runId);
        statements.dropRunStateChanges.run(runId);
        statements.markAbandoned.run(at, runId);
      })();
    },

    currentSeq(): number {
      return statements.currentSeq.get() as number;
    },

    progress(runId: string, seriesId: string): SeriesProgress | undefined {
      const row = statements.progress.get(runId, seriesId) as Record<string, unknown> | undefined;
      return row && seriesProgressFrom(seriesId, row, statements.stateChanges.all(runId, seriesId) as string[]);
    },
    /** A page, its series' progress, spend, dedupe keys, journal entry, its sinks' rows and checkpoints, in one transaction. */
    commitPage(commit: PageCommit): void {
      commitPage(commit);
    },
    /** An end that came without a page: the budget, a failure, a 403, or the run's stop. */
    endSeries(runId: string, series: SeriesIdentity, end: SeriesEndRecord): void {
      statements.endSeries.run({ runId, ...series, ...end });
    },
    seriesTotals(runId: string): SeriesTotals {
      return statements.seriesTotals.get(runId) as SeriesTotals;
    },
    seriesEnds(runId: string): { status: string; reason: string | null; n: number }[] {
      return statements.seriesEnds.all(runId) as { status: string; reason: string | null; n: number }[];
    },
    seriesStatuses(runId: string, seriesIds: readonly string[]): SeriesStatus[] {
      return statements.seriesStatuses.all(runId, JSON.stringify(seriesIds)) as SeriesStatus[];
    },
    /** Failed series by the class of their last error. */
    failedKinds(runId: string): Record<string, number> {
      return Object.fromEntries((statements.failedKinds.all(runId) as { kind: string; n: number }[]).map((r) => [r.kind, r.n]));
    },

    journal,
    /** Journal entries after `seq`, in order. Read in batches: a sink may write to this connection in between. */
    *journalAfter(seq: number): Generator<JournalEntry> {
      let after = seq;
      for (;;) {
        const rows = statements.journalAfter.all(after) as Record<string, unknown>[];
        if (rows.length === 0) return;
        for (const row of rows) {
          const entry = journalEntryFrom(row);
          after = entry.seq;
          yield entry;
        }
      }
    },
    /** Journal entries every sink holds are no longer needed (unless the journal is kept). */
    prune(heldByAll: number): void {
      statements.prune.run(heldByAll);
    },

    spend,
    spendOf(runId: string) {
      const totals = statements.spendOf.get(runId) as { spent: number; uncertain: number; uncommitted: number; requests: number; retries: number };
      const byStatus = Object.fromEntries((statements.spendByStatus.all(runId) as { status: string; n: number }[]).map((r) => [r.status, r.n]));
      const byEndpoint = Object.fromEntries((statements.spendByPath.all(runId) as { path: string; credits: number }[]).map((r) => [r.path, r.credits]));
      return { ...totals, byStatus, byEndpoint };
    },

    /** Where each sink stood when a run began, so that an abandoned run's output can be taken back. */
    recordSinkStarts(runId: string, starts: readonly { sinkId: string; seq: number; bytes: number | null }[]): void {
      for (const start of starts) statements.runSinkStart.run(runId, start.sinkId, start.seq, start.bytes);
    },
    sinkStarts(runId: string): Map<string, { seq: number; bytes: number | null }> {
      const rows = statements.runSinks.all(runId) as { sink_id: string; start_seq: number; start_bytes: number | null }[];
      return new Map(rows.map((r) => [r.sink_id, { seq: r.start_seq, bytes: r.start_bytes }]));
    },

    failedSeries(runId: string, limit: number) {
      return (statements.failedSeries.all(runId, limit) as Record<string, unknown>[]).map(failedSeriesFrom);
    },
    /** Attempts add up: a delivery aborted and sent again by a later invocation counts both. */
    claimNotification(notification: Omit<NotificationRecord, 'status' | 'attempts' | 'error' | 'updatedAt'>): boolean {
      return statements.claimNotification.run(notification).changes === 1;
    },
    settleNotification(key: NotificationKey, outcome: { status: NotificationRecord['status']; attempts: number; error: string | null; at: string }): void {
      statements.settleNotification.run({ ...key, ...outcome });
    },
    pendingNotifications(pipeline: string, limit: number, staleBefore: string): NotificationRecord[] {
      return (statements.pendingNotifications.all({ pipeline, limit, staleBefore }) as Record<string, unknown>[]).map(notificationFrom);
    },
    takeNotification(key: NotificationKey, at: string, staleBefore: string): boolean {
      return statements.takeNotification.run({ ...key, at, staleBefore }).changes === 1;
    },
    /**
     * A scheduled occurrence claimed once, never ahead of the store's clock (docs/schedules.md#clocks). SQLite has no
     * server clock: the store's is this machine's, read here, which every worker of a SQLite pipeline shares (a file
     * is one machine's), whatever clock a worker's loop keeps.
     */
    claimOccurrence(claim: { pipeline: string; dueAt: string; outcome: OccurrenceOutcome; worker: string; note?: string | null }): OccurrenceClaim {
      const storeTime = clock();
      if (Date.parse(claim.dueAt) > storeTime + CLAIM_AHEAD_TOLERANCE_MS) return { result: 'ahead', storeTime };
      const won = statements.claimOccurrence.run(claim.pipeline, claim.dueAt, claim.outcome, claim.worker, new Date(storeTime).toISOString(), claim.note ?? null).changes === 1;
      return { result: won ? 'won' : 'taken', storeTime };
    },
    storeClock: (): number => clock(),
    settleOccurrence(pipeline: string, dueAt: string, settled: { outcome: OccurrenceOutcome; runId?: string | null; note?: string | null }): void {
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
    occurrences(pipeline: string, options: { limit?: number; dueBy?: string; runId?: string; dueAt?: string } = {}): OccurrenceRecord[] {
      const dueBy = options.dueBy === undefined ? null : new Date(options.dueBy).toISOString();
      const rows =
        options.dueAt !== undefined
          ? statements.occurrenceAt.all(pipeline, new Date(options.dueAt).toISOString())
          : options.runId !== undefined
            ? statements.occurrenceOfRun.all(pipeline, options.runId)
            : statements.occurrences.all({ pipeline, dueBy, limit: options.limit ?? -1 });
      return (rows as Record<string, unknown>[]).map(occurrenceRecordFrom);
    },
    pruneOccurrences(pipeline: string, keep: number): void {
      statements.pruneOccurrences.run({ pipeline, keep });
    },
  };
}

export type SqliteStateTables = ReturnType<typeof openStateStore>;
