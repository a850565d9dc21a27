import type Database from 'better-sqlite3';
import { rowInserter } from '../../commits/row-insert.ts';
import { crashPoint } from '../../crash-points.ts';
import { OutputError } from '../../errors/output-error.ts';
import type { JournalWrite, PageCommit, SpendRow } from '../interfaces.ts';
import type { sinkCheckpoints } from './checkpoints.ts';
import type { dedupeTables } from './seen-keys.ts';
import type { stateStatements } from './statements.ts';

/** What a page's transaction writes to, in the state store's file. */
export interface PageTables {
  readonly statements: ReturnType<typeof stateStatements>;
  readonly checkpoints: ReturnType<typeof sinkCheckpoints>;
  readonly dedupe: ReturnType<typeof dedupeTables>;
  journal(entry: JournalWrite): void;
  spend(row: SpendRow): void;
}

/**
 * A page's commit as one SQLite transaction (docs/design.md#one-transaction-per-page): its series' progress and stage
 * state, spend, dedupe keys, journal entry, the files' checkpoints, and the rows of the sinks in this file with theirs
 * (docs/design.md#the-commit-contract). Refused, whole, if the journal's number is not the one the page expects.
 */
export function pageTransaction(db: Database.Database, tables: PageTables): (commit: PageCommit) => void {
  const { statements, checkpoints, dedupe } = tables;
  const insertRows = rowInserter(db);
  return db.transaction((commit: PageCommit) => {
    const seq = statements.nextSeq.get() as number;
    if (seq !== commit.seq) throw new OutputError('locked', 'the page journal moved under this run: another process is writing to the state store. Run again once it has finished', undefined);
    for (const row of commit.spend) tables.spend(row);
    if (commit.dedupe) dedupe.write(commit.dedupe, commit.runId);
    const { state, ...progress } = commit.progress;
    const isSnapshot = state.kind === 'snapshot';
    statements.commitSeries.run({ runId: commit.runId, ...commit.series, ...progress, snapshot: isSnapshot ? state.json : null, isSnapshot: isSnapshot ? 1 : 0 });
    // A snapshot replaces the changes before it; changes go after them.
    if (isSnapshot) statements.dropStateChanges.run(commit.runId, commit.series.seriesId);
    else if (state.json !== null) statements.addStateChanges.run(commit.runId, commit.series.seriesId, seq, state.json);
    if (commit.journal) tables.journal(commit.journal);
    for (const { sinkId, checkpoint } of commit.checkpoints) checkpoints.set(sinkId, checkpoint);
    // The rows of the sinks in this file, each with its checkpoint: the page is in their tables wholly, or not at all.
    for (const rows of commit.rows) {
      if (rows.kind !== 'sqlite') throw new Error(`rows for ${rows.sinkId} are not for a SQLite table`);
      insertRows(rows.insert, rows.values);
      checkpoints.set(rows.sinkId, { seq: commit.seq, bytes: null });
    }
    crashPoint('page-transaction');
  });
}
