// What a page's commit writes for a sink, as data (docs/design.md#the-commit-contract): made by the sinks, written by
// the state stores (state/) and the commit thread, which therefore need only this floor, never the sinks' own modules.
// Data only, no functions: a page's writes cross to the commit thread.

/**
 * A sink's insert as parts, so that one statement can take several rows (`statements.ts`, `sqliteRowsInsert`): its head
 * (the table and its columns, quoted), then the rows' values, then what follows them. Data only: it crosses to the
 * commit thread.
 */
export interface RowInsert {
  /** The insert's head: the table and its columns, quoted (the SQLite sink's `insert` statement, sinks/statements.ts). */
  readonly into: string;
  /** Values per row: the flat values hold `width` of them for each row, in order. */
  readonly width: number;
  /** What follows the rows, if anything (an upsert's `ON CONFLICT … DO UPDATE …`). */
  readonly then: string;
}

/**
 * A page's rows for a table in a SQLite file, and the sink's checkpoint with them (the file's `sink_checkpoints`):
 * written in the page's transaction when the file is the state store's, else in one of the sink's own.
 */
export interface SqliteRows {
  readonly kind: 'sqlite';
  readonly sinkId: string;
  /** The sink's insert (its columns and mode), as parts that take any number of rows. */
  readonly insert: RowInsert;
  /** The page's rows, one after another: `insert.width` values each. */
  readonly values: unknown[];
}

/**
 * A page's rows for a PostgreSQL table, one array per column (the statement unnests them: one parameter per column,
 * whatever the page's length), and where the sink's checkpoint is kept: written as parts of the state store's page
 * statement when the database is the state's, else as a statement of the sink's own (`postgres-rows.ts`).
 */
export interface PostgresRows {
  readonly kind: 'postgres';
  readonly sinkId: string;
  /** The table, quoted and qualified. */
  readonly table: string;
  /** The columns, quoted, in the order of `arrays`. */
  readonly columns: string;
  /** Each column's element type (`text`, `integer`, `timestamptz`, `jsonb`). */
  readonly types: readonly string[];
  /** The page's values, one array per column. */
  readonly arrays: readonly unknown[][];
  /** Which column is `dedupe_key` (-1: none): a distributed run writes only the rows whose key its page claimed. */
  readonly keyColumn: number;
  /** What follows the rows: an upsert's `ON CONFLICT … DO UPDATE …`, or nothing. */
  readonly conflict: string;
  /** The sink's checkpoint: its table (quoted and qualified) and its row there. */
  readonly checkpoint: { readonly table: string; readonly pipeline: string };
}

/** A page's rows for a table sink, in the database the sink names. */
export type SinkRows = SqliteRows | PostgresRows;

/** csv-stringify's options for a CSV sink's records: data, so that the commit thread renders as the sink would. */
export interface CsvFormat {
  readonly delimiter: string;
  readonly escape_formulas: boolean;
  readonly record_delimiter: 'windows';
  readonly header: false;
}

/**
 * What a page appends to a file: its text (JSON Lines), or its CSV records as cells, rendered where they are appended
 * (`csvText`), so that a store with a commit thread renders them there.
 */
export type FileContent =
  | { readonly text: string }
  | {
      readonly csv: CsvFormat;
      /** The page's cells, one record after another: `width` each. */
      readonly width: number;
      readonly cells: string[];
    };

/**
 * A page's bytes for a file sink, as data: the state store appends them to the sink's open file just before the
 * page's transaction (on its commit thread where it has one) and records the file's new length there as the sink's
 * checkpoint (docs/design.md#the-commit-contract).
 */
export interface FileAppend {
  readonly sinkId: string;
  /** The file, for what a failure to write it says. */
  readonly path: string;
  /** The sink's open file (a descriptor is the process's: any thread may write it). */
  readonly fd: number;
  /** Other pipelines append to the file too: what was appended is never taken back. */
  readonly shared: boolean;
  readonly content: FileContent;
}
