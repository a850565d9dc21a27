import type Database from 'better-sqlite3';
import type { JournalEntry, StateStore } from '../interfaces.ts';
import { seenKeys } from './seen-keys.ts';
import { openStateStore } from './store.ts';

/** The SQLite state store: the interface, and its database for what lives beside it in the same file (SQLite sinks, views). */
export interface SqliteStateStore extends StateStore {
  readonly db: Database.Database;
}

/**
 * The run-state store in a SQLite file, behind the asynchronous interface every store shares. Each call does its
 * work synchronously before it returns (better-sqlite3 is synchronous), so a page's commit is still one SQLite
 * transaction, with the rows of SQLite sinks in the same file. `clock`: the store's clock, which its claims of scheduled
 * occurrences are measured against (default this machine's; a test gives its virtual one).
 */
export function sqliteStateStore(db: Database.Database, options: { clock?: () => number } = {}): SqliteStateStore {
  const tables = openStateStore(db, options.clock);
  return {
    db,
    path: tables.path,
    database: `sqlite:${tables.path}`,
    lease: async (pipeline) => tables.lease(pipeline),
    checkpoints: {
      get: async (sinkId) => tables.checkpoints.get(sinkId),
      set: async (sinkId, checkpoint) => tables.checkpoints.set(sinkId, checkpoint),
    },
    seenKeys: (runId) => seenKeys(tables.dedupe, runId),
    startRun: async (run) => tables.startRun(run),
    reopenRun: async (runId, budget, terms) => tables.reopenRun(runId, budget, terms),
    finishRun: async (runId, status, finishedAt, summary, error) => tables.finishRun(runId, status, finishedAt, summary, error),
    latestRun: async (pipeline) => tables.latestRun(pipeline),
    runs: async (pipeline) => tables.runs(pipeline),
    abandonRun: async (runId, at) => tables.abandonRun(runId, at),
    currentSeq: async () => tables.currentSeq(),
    progress: async (runId, seriesId) => tables.progress(runId, seriesId),
    commitPage: async (commit) => tables.commitPage(commit),
    endSeries: async (runId, series, end) => tables.endSeries(runId, series, end),
    seriesTotals: async (runId) => tables.seriesTotals(runId),
    seriesEnds: async (runId) => tables.seriesEnds(runId),
    seriesStatuses: async (runId, seriesIds) => tables.seriesStatuses(runId, seriesIds),
    failedKinds: async (runId) => tables.failedKinds(runId),
    async *journalAfter(seq): AsyncGenerator<JournalEntry> {
      yield* tables.journalAfter(seq);
    },
    prune: async (heldByAll) => tables.prune(heldByAll),
    spend: async (rows) => {
      db.transaction(() => {
        for (const row of rows) tables.spend(row);
      })();
    },
    spendOf: async (runId) => tables.spendOf(runId),
    recordSinkStarts: async (runId, starts) => tables.recordSinkStarts(runId, starts),
    sinkStarts: async (runId) => tables.sinkStarts(runId),
    failedSeries: async (runId, limit) => tables.failedSeries(runId, limit),
    claimNotification: async (notification) => tables.claimNotification(notification),
    settleNotification: async (key, outcome) => tables.settleNotification(key, outcome),
    pendingNotifications: async (pipeline, limit, staleBefore) => tables.pendingNotifications(pipeline, limit, staleBefore),
    takeNotification: async (key, at, staleBefore) => tables.takeNotification(key, at, staleBefore),
    claimOccurrence: async (claim) => tables.claimOccurrence(claim),
    storeClock: async () => tables.storeClock(),
    settleOccurrence: async (pipeline, dueAt, settled) => tables.settleOccurrence(pipeline, dueAt, settled),
    occurrences: async (pipeline, options) => tables.occurrences(pipeline, options),
    pruneOccurrences: async (pipeline, keep) => tables.pruneOccurrences(pipeline, keep),
  };
}
