import type Database from 'better-sqlite3';
import type { JournalEntry, RunRecords, RunStore, SeriesStatus, SeriesTotals } from '../interfaces.ts';
import { journalEntryFrom, runRecordFrom, seriesProgressFrom } from '../rows.ts';
import { sinkCheckpoints } from './checkpoints.ts';
import { acquireLease } from './lease.ts';
import { type dedupeTables, seenKeys } from './seen-keys.ts';
import { runStatements } from './statements.ts';

type Statements = ReturnType<typeof runStatements>;

/** What of the runs-and-pages role a page's commit is not (`page-commits.ts`). */
export type SqliteRuns = Omit<RunStore, 'commitPage' | 'queuesCommits' | 'close'>;

/**
 * Runs and pages in a SQLite state file (docs/design.md#the-state-store): runs, series progress and stage state, the
 * page journal, where sinks began, the lease, the file sinks' checkpoints, the dedupe keys. Each call does its work
 * before it returns (better-sqlite3 is synchronous).
 */
export function sqliteRuns(db: Database.Database, dedupe: ReturnType<typeof dedupeTables>): SqliteRuns {
  const statements = runStatements(db);
  const checkpoints = sinkCheckpoints(db);
  return {
    path: db.name,
    database: `sqlite:${db.name}`,
    lease: async (pipeline) => acquireLease(db, pipeline),
    checkpoints: {
      get: async (sinkId) => checkpoints.get(sinkId),
      set: async (sinkId, checkpoint) => checkpoints.set(sinkId, checkpoint),
    },
    seenKeys: (runId) => seenKeys(dedupe, runId),
    ...runRecords(db, statements, dedupe),
    ...seriesAndJournal(statements),
    async recordSinkStarts(runId, starts) {
      for (const start of starts) statements.runSinkStart.run(runId, start.sinkId, start.seq, start.bytes);
    },
    async sinkStarts(runId) {
      const rows = statements.runSinks.all(runId) as { sink_id: string; start_seq: number; start_bytes: number | null }[];
      return new Map(rows.map((r) => [r.sink_id, { seq: r.start_seq, bytes: r.start_bytes }]));
    },
  };
}

/** The runs' own rows. */
function runRecords(db: Database.Database, statements: Statements, dedupe: ReturnType<typeof dedupeTables>): RunRecords {
  const abandon = db.transaction((runId: string, at: string) => {
    statements.dropRunPages.run(runId);
    statements.dropRunSeries.run(runId);
    statements.dropRunStateChanges.run(runId);
    statements.markAbandoned.run(at, runId);
  });
  return {
    async startRun(run) {
      // Run-scoped dedupe keys a finished run left behind (it forgets them as it finishes; a failure there leaves them).
      dedupe.forgetFinished();
      statements.insertRun.run(run.runId, run.pipeline, run.startedAt, run.fingerprint, JSON.stringify(run.plan), run.budget, run.terms === undefined ? null : JSON.stringify(run.terms));
    },
    async reopenRun(runId, budget, terms) {
      statements.reopenRun.run(budget, terms === undefined ? null : JSON.stringify(terms), runId);
    },
    async finishRun(runId, status, finishedAt, summary, error) {
      statements.finishRun.run(status, finishedAt, summary === undefined ? null : JSON.stringify(summary), error ?? null, runId);
    },
    async latestRun(pipeline) {
      const row = statements.latestRun.get(pipeline) as Record<string, unknown> | undefined;
      return row && runRecordFrom(row);
    },
    async runs(pipeline) {
      return (statements.runsOf.all(pipeline) as Record<string, unknown>[]).map(runRecordFrom);
    },
    async abandonRun(runId, at) {
      abandon(runId, at);
    },
  };
}

/** Series progress and how they ended, and the journal. */
function seriesAndJournal(statements: Statements): Pick<RunStore, 'currentSeq' | 'progress' | 'endSeries' | 'seriesTotals' | 'seriesEnds' | 'seriesStatuses' | 'reachedStatuses' | 'seriesProgresses' | 'failedKinds' | 'journalAfter' | 'prune'> {
  return {
    currentSeq: async () => statements.currentSeq.get() as number,
    async progress(runId, seriesId) {
      const row = statements.progress.get(runId, seriesId) as Record<string, unknown> | undefined;
      return row && seriesProgressFrom(seriesId, row, statements.stateChanges.all(runId, seriesId) as string[]);
    },
    /** An end that came without a page: the budget, a failure, a 403, or the run's stop. */
    async endSeries(runId, series, end) {
      statements.endSeries.run({ runId, ...series, ...end });
    },
    seriesTotals: async (runId) => statements.seriesTotals.get(runId) as SeriesTotals,
    seriesEnds: async (runId) => statements.seriesEnds.all(runId) as { status: string; reason: string | null; n: number }[],
    seriesStatuses: async (runId, seriesIds) => statements.seriesStatuses.all(runId, JSON.stringify(seriesIds)) as SeriesStatus[],
    reachedStatuses: async (runId, after, limit) => statements.reachedStatuses.all(runId, after, limit) as SeriesStatus[],
    async seriesProgresses(runId, seriesIds) {
      const ids = JSON.stringify(seriesIds);
      const changes = new Map<string, string[]>();
      for (const { series_id: id, changes: change } of statements.statesChanges.all(runId, ids) as { series_id: string; changes: string }[]) {
        const before = changes.get(id);
        if (before) before.push(change);
        else changes.set(id, [change]);
      }
      return (statements.progresses.all(runId, ids) as Record<string, unknown>[]).map((row) => seriesProgressFrom(row.series_id as string, row, changes.get(row.series_id as string) ?? []));
    },
    /** Failed series by the class of their last error. */
    async failedKinds(runId) {
      return Object.fromEntries((statements.failedKinds.all(runId) as { kind: string; n: number }[]).map((r) => [r.kind, r.n]));
    },
    /** Journal entries after `seq`, in order. Read in batches: a sink may write to this connection in between. */
    async *journalAfter(seq): AsyncGenerator<JournalEntry> {
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
    prune: async (heldByAll) => void statements.prune.run(heldByAll),
  };
}
