import type Database from 'better-sqlite3';
import { appendFiles } from '../../commits/file-appends.ts';
import { rowInserter } from '../../commits/row-insert.ts';
import { crashPoint } from '../../crash-points.ts';
import { OutputError } from '../../errors/output-error.ts';
import type { Checkpoint, PageCommit } from '../interfaces.ts';
import { sinkCheckpoints } from './checkpoints.ts';
import { dedupeTables } from './seen-keys.ts';
import { spendWriter } from './spend.ts';
import { runStatements } from './statements.ts';

/**
 * A page's commit in a SQLite state file (docs/design.md#one-transaction-per-page), on a connection of its own (the
 * commit thread's) or the store's: its files' bytes appended, then one transaction of its series' progress and stage
 * state, spend, dedupe keys, journal entry, the files' checkpoints, and the rows of the sinks in this file with theirs
 * (docs/design.md#the-commit-contract). Refused, whole, if the journal's number is not the one the page expects.
 * Synchronous; returns the files' new lengths, in the order of `appends`.
 */
export function pageTransaction(db: Database.Database): (commit: PageCommit) => number[] {
  const statements = runStatements(db);
  const writeSpend = spendWriter(db);
  const checkpoints = sinkCheckpoints(db);
  const dedupe = dedupeTables(db);
  const insertRows = rowInserter(db);
  const transaction = db.transaction((commit: PageCommit, appended: readonly { sinkId: string; checkpoint: Checkpoint }[]) => {
    const seq = statements.nextSeq.get() as number;
    if (seq !== commit.seq) throw new OutputError('locked', 'the page journal moved under this run: another process is writing to the state store. Run again once it has finished', undefined);
    // Each row's credits move out of the allowance's hold they were held under, with the page.
    for (const row of commit.spend) writeSpend(row);
    if (commit.dedupe) dedupe.write(commit.dedupe, commit.runId);
    const { state, ...progress } = commit.progress;
    const isSnapshot = state.kind === 'snapshot';
    statements.commitSeries.run({ runId: commit.runId, ...commit.series, ...progress, snapshot: isSnapshot ? state.json : null, isSnapshot: isSnapshot ? 1 : 0 });
    // A snapshot replaces the changes before it; changes go after them.
    if (isSnapshot) statements.dropStateChanges.run(commit.runId, commit.series.seriesId);
    else if (state.json !== null) statements.addStateChanges.run(commit.runId, commit.series.seriesId, seq, state.json);
    const journal = commit.journal;
    if (journal) statements.insertPage.run(journal.seq, journal.runId, journal.pageKey, journal.seriesId, journal.number, journal.meta, journal.output, journal.raw, new Date().toISOString());
    for (const { sinkId, checkpoint } of [...commit.checkpoints, ...appended]) checkpoints.set(sinkId, checkpoint);
    // The rows of the sinks in this file, each with its checkpoint: the page is in their tables wholly, or not at all.
    for (const rows of commit.rows) {
      if (rows.kind !== 'sqlite') throw new Error(`rows for ${rows.sinkId} are not for a SQLite table`);
      insertRows(rows.insert, rows.values);
      checkpoints.set(rows.sinkId, { seq: commit.seq, bytes: null });
    }
    crashPoint('page-transaction');
  });
  return (commit) => {
    const appends = commit.appends ?? [];
    // The files' bytes go first: their new lengths are the checkpoints the transaction records.
    const { lengths } = appendFiles(appends);
    // The write lock first, for the reason a spend row's write takes it (sqlite/spend.ts): the page reads the journal's
    // next seq before it writes. Inside a batch's transaction this is a savepoint, the batch's lock already held.
    transaction.immediate(
      commit,
      appends.map(({ sinkId }, index) => ({ sinkId, checkpoint: { seq: commit.seq, bytes: lengths[index] as number } })),
    );
    return lengths;
  };
}
