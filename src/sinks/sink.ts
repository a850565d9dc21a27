import type Database from 'better-sqlite3';
import type { Page } from '../pipeline/page.ts';
import type { Pool } from '../postgres/pools.ts';
import type { PostgresTarget } from '../postgres/target.ts';
import type { Checkpoint, SinkCheckpoints } from '../state/interfaces.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';
import type { FileAppend, SinkRows } from '../commits/page-writes.ts';
import type { SeriesOutcome } from './series-outcomes.ts';
import type { TrackedRow } from './series-tracked.ts';

export type { CsvFormat, FileAppend, FileContent, PostgresRows, SinkRows, SqliteRows } from '../commits/page-writes.ts';

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
  /** The pipeline tracks domains: a results table keeps their ranks beside it (`series-tracked.ts`). */
  readonly tracked?: boolean;
  /**
   * A SQLite sink with the default columns announces its results table here once it is ready; the runner then
   * creates the analytics views over it (sinks do not build analytics).
   */
  resultsTable?(at: ResultsDatabase, table: string, mode: 'append' | 'replace' | 'upsert'): void | Promise<void>;
  /** The state store's file: with the pipeline's name, who writes an output (see the output registry). */
  readonly statePath: string;
}

/**
 * How a sink takes part in a page's commit (docs/design.md#the-commit-contract): one of three, and the committer has
 * one path for each.
 *
 * - `rows`: a table's rows, as data. On the state store's database they are written inside the page's own transaction,
 *   with the sink's checkpoint; on another database, by the sink in a transaction of its own with its checkpoint, once
 *   the page has committed. Exactly once either way.
 * - `append`: a file's bytes, as data, which the state store appends just before the page's transaction (on its
 *   commit thread where it has one) and whose new length it records there as the sink's checkpoint; bytes past it are
 *   cut back when the file is next opened. Exactly once (at least once for a file `shared` by pipelines).
 * - `deliver`: the page, handed over once its transaction has committed; the sink records what it holds after. At least
 *   once, or exactly once when the delivery is idempotent.
 *
 * After a crash, the committed pages a sink lacks (past `held()`) come again from the journal, each written the sink's
 * way on its own: rows in the sink's own transaction, bytes appended with the checkpoint after, or delivered.
 */
// The members that take a page are function properties, not methods: TypeScript compares method parameters both ways,
// and a sink for normalized items then passed for one of raw items (docs/pipelines.md#composing-in-code).
export type Participation<I = NormalizedItem> =
  | {
      readonly kind: 'rows';
      /** The database the table is in (`sqlite:<file>`, `postgres://host:port/db`). */
      readonly database: string;
      /** The page's rows, as the store (or the sink itself) writes them. */
      readonly rows: (page: Page<I>, seq: number) => SinkRows;
      /** Writes rows in a transaction of the sink's own, with its checkpoint (another database, or a replay). */
      writeAlone(rows: SinkRows, seq: number): void | Promise<void>;
      /** The page's rows are committed. */
      committed(seq: number): void;
    }
  | {
      readonly kind: 'append';
      /** The page's bytes (`FileAppend`: text, or CSV cells rendered where they are appended), not yet written. */
      readonly append: (page: Page<I>) => FileAppend;
      /** The checkpoint is committed: the file holds the page, and is this long. */
      committed(checkpoint: Checkpoint): void;
    }
  | {
      readonly kind: 'deliver';
      /** Takes a committed page, and records that it holds it. */
      readonly deliver: (page: Page<I>, seq: number) => Promise<void>;
    };

/**
 * Where pages go: what the runner needs of a sink (`defineSink` makes one from a small spec). It takes part in each
 * page's commit one way (`commits`), and keeps the journal number of the last page it holds (`held`), so that after a
 * crash the runner re-delivers from the journal the committed pages it lacks: exactly once per sink.
 */
export interface Sink<in I = NormalizedItem> {
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
  /** How it takes part in a page's commit. */
  readonly commits: Participation<I>;
  open(ctx: SinkContext): void | Promise<void>;
  /** The sequence number of the last journal page this sink holds (valid after `open`): what replay starts after. */
  held(): number;
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
  /**
   * How each series of the run ended (`series-outcomes.ts`), recorded beside its rows: called as every invocation of
   * the run closes, however it ended, a slice of the plan at a time. A results table with the analytics views keeps them,
   * so that a series that failed or was not reached is not read as its results gone (docs/analytics.md#failed-and-unreached-series).
   */
  outcomes?(runId: string, outcomes: readonly SeriesOutcome[]): void | Promise<void>;
  /**
   * Each tracked domain's best rank per series (`series-tracked.ts`), recorded beside the rows as the outcomes are, a
   * slice at a time, when the pipeline tracks domains (docs/pipelines.md#tracked-domains-and-depth-until-found).
   */
  tracked?(runId: string, rows: readonly TrackedRow[]): void | Promise<void>;
  /** The run finished by its own rules (completed, budget, failed series): e.g. drop earlier runs' rows (replace). */
  finish?(runId: string): void | Promise<void>;
  /**
   * Takes back what an abandoned run wrote: its rows, or the file's bytes after `since.bytes`. `starts` has where every
   * sink of the run began (a per-worker sink takes back its other workers' files with it).
   */
  discard?(runId: string, since: { seq: number; bytes: number | null }, starts?: ReadonlyMap<string, { seq: number; bytes: number | null }>): void | Promise<void>;
  close(): void | Promise<void>;
}

/** The database a sink's rows go to, when it writes rows (`sqlite:<file>`, `postgres://host:port/db`). */
export function databaseOf(sink: Pick<Sink<unknown>, 'commits'>): string | undefined {
  return sink.commits.kind === 'rows' ? sink.commits.database : undefined;
}
