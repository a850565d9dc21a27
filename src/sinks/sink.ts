import type Database from 'better-sqlite3';
import type { Page } from '../pipeline/page.ts';
import type { Pool } from '../postgres/pools.ts';
import type { PostgresTarget } from '../postgres/target.ts';
import type { Checkpoint, SharedTransaction, SinkCheckpoints } from '../state/interfaces.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';
import type { SinkRecords, SinkRows } from '../commits/page-writes.ts';

export type { CsvFormat, SinkRecords, SinkRows } from '../commits/page-writes.ts';

/** Where a results table lives: a SQLite connection, or a PostgreSQL pool and the table's schema. */
export type ResultsDatabase = { readonly kind: 'sqlite'; readonly db: Database.Database } | { readonly kind: 'postgres'; readonly pool: Pool; readonly schema: string };

/** What a sink gets when the run opens it. */
export interface SinkContext {
  readonly runId: string;
  readonly pipeline: string;
  /** One connection per database file within a run, shared with the state store so that they can commit together. */
  database(path: string): Database.Database;
  /** One pool per PostgreSQL database within a run, shared with the state store there so that they can commit together. */
  postgres(target: PostgresTarget): Pool;
  /** Checkpoints kept in the state store, for sinks that are not databases (files). */
  readonly stateCheckpoints: SinkCheckpoints;
  /** The journal's sequence number now: a sink seen for the first time holds everything up to it. */
  readonly currentSeq: number;
  /** Tag columns every row carries (from a query list): sinks with default columns add them. */
  readonly tagColumns: readonly string[];
  /** The run's workers write this output together (a distributed run): no lease of one process's own on it. */
  readonly shared?: boolean;
  /**
   * A SQLite sink with the default columns announces its results table here once it is ready; the runner then
   * creates the analytics views over it (sinks do not build analytics).
   */
  resultsTable?(at: ResultsDatabase, table: string, mode: 'append' | 'replace' | 'upsert'): void | Promise<void>;
  /** The state store's file: with the pipeline's name, who writes an output (see the output registry). */
  readonly statePath: string;
}

/**
 * Where pages go. A sink writes each page once, in one commit (a transaction, or a synchronous write), and records
 * in that commit (or right after it, for files) the journal sequence number of the last page it holds (`held`).
 * After a crash the runner re-delivers, from the journal, the committed pages a sink lacks: exactly once per sink.
 * To write a sink of your own, give `defineSink` its `write` (and `open`, `close`): it provides the rest.
 */
export interface Sink<I = NormalizedItem> {
  /** e.g. `sqlite`, `csv`. */
  readonly kind: string;
  /** The file written, resolved; for a sink that writes no file, what it writes to (a table, a URL, a name). */
  readonly path: string;
  /**
   * False when `path` names no file: a sink of your own (`defineSink`) puts its target there, which may be a URL. Such a
   * path is never where the state store goes, nor a file the run is said to write.
   */
  readonly writesFile?: boolean;
  /** Stable identity across runs: kind, file (and table). */
  readonly id: string;
  /**
   * The database it writes to, when it is one (`sqlite:<file>`, `postgres://host:port/db`): a sink on the state
   * store's database writes inside the page's own transaction, given as `tx` to `write`.
   */
  readonly database?: string;
  open(ctx: SinkContext): void | Promise<void>;
  /** The sequence number of the last journal page this sink holds (valid after `open`): what replay starts after. */
  held(): number;
  write(page: Page<I>, seq: number, tx?: SharedTransaction): void | Promise<void>;
  /**
   * A sink of plain rows on the state store's SQLite file, instead of `write`: the page's rows as one insert
   * statement's values, which the page's transaction writes wherever it runs (the commit thread), with the sink's
   * checkpoint; `committed` is called once it has.
   */
  rows?(page: Page<I>, seq: number): SinkRows;
  /**
   * File sinks whose checkpoint lives in the state store: write the page's bytes now, not yet committed, and return
   * the new checkpoint, which the runner records inside the page's own transaction (then calls `committed`). A crash
   * in between leaves bytes past the checkpoint, cut back on the next open; so the page needs no journal entry to
   * reach this sink.
   */
  stage?(page: Page<I>, seq: number): { checkpoint: Checkpoint; committed(): void; abandoned?(): void };
  /**
   * A file sink of CSV records, instead of `stage` where the run has a commit thread: the page's cells, which the
   * thread renders and appends just before the page's transaction, and checkpoints inside it (as `stage` would).
   */
  records?(page: Page<I>, seq: number): SinkRecords;
  /**
   * A file sink that each worker of a distributed run writes a file of its own for (`<name>.<host>-<n><ext>`): such a
   * sink does not keep a run on one process, and takes no replay from the journal (its pages are its worker's).
   */
  readonly perWorker?: boolean;
  /**
   * Writes, inside the page's statement, only the rows whose `dedupe_key` the statement claimed for the run
   * (`PageStatement.claimed`): a distributed run whose dedupe looks across series needs every sink to.
   */
  readonly claimsDedupeKeys?: boolean;
  /**
   * What decides the rows it writes, as data (its table or file, mode, columns…): recorded with a run, and compared when
   * the run resumes or a worker joins it (`run/run-terms.ts`). Without it, the sink's `id` stands for it.
   */
  readonly terms?: Readonly<Record<string, unknown>>;
  /** How pages reach the output: exactly once (the default), or at least once (stdout, a file shared by pipelines). */
  readonly delivery?: 'exactly_once' | 'at_least_once';
  /** Bytes committed so far, for file sinks: where a run began, so that `--fresh` can take its rows back. */
  committedBytes?(): number | null;
  /** The run finished by its own rules (completed, budget, failed series): e.g. drop earlier runs' rows (replace). */
  finish?(runId: string): void | Promise<void>;
  /**
   * Takes back what an abandoned run wrote: its rows, or the file's bytes after `since.bytes`. `starts` has where every
   * sink of the run began (a per-worker sink takes back its other workers' files with it).
   */
  discard?(runId: string, since: { seq: number; bytes: number | null }, starts?: ReadonlyMap<string, { seq: number; bytes: number | null }>): void | Promise<void>;
  close(): void | Promise<void>;
}
