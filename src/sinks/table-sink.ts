import type { Page } from '../pipeline/page.ts';
import type { SinkRows } from '../commits/page-writes.ts';
import type { SeriesOutcome } from './series-outcomes.ts';
import type { TrackedRow } from './series-tracked.ts';
import type { Sink, SinkContext } from './sink.ts';

/**
 * What a results table answers for, as a class with private fields holding its output (`SqliteTable`,
 * `PostgresTable`): its rows inside a page's commit, on their own, and its life from open to close.
 */
export interface ResultsTable<R extends SinkRows> {
  readonly held: number;
  rows(page: Page<Record<string, unknown>>): R;
  writeAlone(rows: R, seq: number): void | Promise<void>;
  committed(seq: number): void;
  open(ctx: SinkContext): void | Promise<void>;
  outcomes(runId: string, outcomes: readonly SeriesOutcome[]): void | Promise<void>;
  tracked(runId: string, rows: readonly TrackedRow[]): void | Promise<void>;
  discard(runId: string): void | Promise<void>;
  finish(runId: string): void | Promise<void>;
  close(): void | Promise<void>;
}

/**
 * The members of a table sink that are its table's, the same for SQLite and PostgreSQL: it takes part in a page's
 * commit with its rows (`database` says where the table is, so that a store on it writes them in the page's own
 * transaction), and the rest is the table's from open to close. The sink's own `kind`, `path`, `id` and `terms` go
 * beside them.
 */
export function tableMembers<R extends SinkRows>(table: ResultsTable<R>, database: string): Pick<Sink<Record<string, unknown>>, 'commits' | 'open' | 'held' | 'outcomes' | 'tracked' | 'discard' | 'finish' | 'close'> {
  return {
    commits: {
      kind: 'rows',
      database,
      rows: (page) => table.rows(page),
      writeAlone: (rows, seq) => table.writeAlone(rows as R, seq),
      committed: (seq) => table.committed(seq),
    },
    open: (ctx) => table.open(ctx),
    held: () => table.held,
    outcomes: (runId, outcomes) => table.outcomes(runId, outcomes),
    tracked: (runId, rows) => table.tracked(runId, rows),
    discard: (runId) => table.discard(runId),
    finish: (runId) => table.finish(runId),
    close: () => table.close(),
  };
}
