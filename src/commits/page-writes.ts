// What a page's commit writes for a sink, as data: made by the sinks, written by the commit thread (state/sqlite/),
// which therefore needs only this floor, never the sinks' own modules.
import type { RowInsert } from './row-insert.ts';

/** A page's rows for a SQLite table, as data: what the commit thread inserts for a sink (see `Sink.rows`). */
export interface SinkRows {
  readonly sinkId: string;
  /** The sink's insert (its columns and mode), as parts that take any number of rows. */
  readonly insert: RowInsert;
  /** The page's rows, one after another: `insert.width` values each. */
  readonly values: unknown[];
  committed(): void;
}

/** csv-stringify's options for a CSV sink's records: data, so that the commit thread renders as the sink would. */
export interface CsvFormat {
  readonly delimiter: string;
  readonly escape_formulas: boolean;
  readonly record_delimiter: 'windows';
  readonly header: false;
}

/**
 * A page's CSV records for a file sink, as data: what the commit thread renders and appends to the sink's open file
 * (see `Sink.records`), recording the file's new length as the sink's checkpoint in the page's transaction.
 */
export interface SinkRecords {
  readonly sinkId: string;
  /** The file, for what a failure to write it says. */
  readonly path: string;
  /** The sink's open file (a descriptor is the process's: any thread may write it). */
  readonly fd: number;
  readonly format: CsvFormat;
  /** The page's cells, one record after another: `width` each. */
  readonly width: number;
  readonly cells: string[];
  /** Once committed, with the file's committed length. */
  committed(bytes: number): void;
}
