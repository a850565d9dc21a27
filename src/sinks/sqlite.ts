import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import type { Page } from '../pipeline/page.ts';
import { RESERVED_TABLES } from '../state/sqlite/schema.ts';
import { checkNormalized, checkUpsertTags, columnName, DEFAULT_COLUMNS, sqlValue, UPSERT_COLUMNS, UPSERT_KEY, upsertColumnsFree } from './columns.ts';
import type { OwnColumns } from './columns.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';
import { sinkCheckpoints } from '../state/sqlite/checkpoints.ts';
import { leaseOutput } from '../state/sqlite/lease.ts';
import type { Lease } from '../state/interfaces.ts';
import type { RowInsert } from '../commits/page-writes.ts';
import { rowInserter } from '../commits/row-insert.ts';
import { prepareSqliteOutcomes, type SqliteOutcomes, sqliteOutcomes } from './sqlite-outcomes.ts';
import type { SeriesOutcome } from './series-outcomes.ts';
import type { TrackedRow } from './series-tracked.ts';
import { prepareSqliteTracked, type SqliteTracked, sqliteTracked } from './sqlite-tracked.ts';
import { tableMembers } from './table-sink.ts';
import type { Sink, SinkContext, SqliteRows } from './sink.ts';
import { sqliteSinkStatements } from './statements.ts';

/**
 * Bumped when the layout of a results table changes; kept in the file's `user_version` (2: how each series ended in
 * each run, `<table>_outcomes`, beside a table with the default columns: series-outcomes.ts). An older webdata-etl
 * refuses a newer file rather than add runs whose outcomes it would not record.
 */
export const RESULTS_SCHEMA_VERSION = 2;

export const sqliteSinkOptionsSchema = z.strictObject({
  path: z.string().min(1, { error: 'must be a file path such as "data/results.sqlite"' }),
  table: columnName
    .refine((name) => !RESERVED_TABLES.has(name.toLowerCase()), { error: `must not be one of the state tables (${[...RESERVED_TABLES].join(', ')})` })
    .default('results'),
  /** Columns, in order (default: the normalized item's). */
  columns: z.array(columnName).min(1).optional(),
  /**
   * `append` keeps every run's rows; `replace` keeps only the latest finished run's (older rows go when a run
   * finishes, in one transaction); `upsert` keeps one row per (query, country, lang, dedupe_key), with
   * `first_seen` and `last_seen` (an item without a dedupe key is appended, never merged).
   */
  mode: z.enum(['append', 'replace', 'upsert'], { error: 'must be append, replace or upsert' }).default('append'),
});

export type SqliteSinkOptions = z.input<typeof sqliteSinkOptionsSchema>;

/**
 * Rows into a SQLite table: WAL, one prepared insert, one transaction per page (with the sink's checkpoint),
 * explicit columns, indexes on (query, country, lang, run_id) and dedupe_key. Modes: see `mode`.
 */
export function toSqlite(options: SqliteSinkOptions & OwnColumns): Sink<object>;
export function toSqlite(options: SqliteSinkOptions): Sink<NormalizedItem>;
export function toSqlite(options: SqliteSinkOptions): Sink<Record<string, unknown>> {
  const config = ValidationError.parse(sqliteSinkOptionsSchema.superRefine(upsertColumnsFree), options, 'Invalid SQLite sink', 'sqlite');
  const table = new SqliteTable(config);
  const { path, id } = table;
  // The table is for the run's check that no two outputs are one (run/outputs.ts), not in the declared type: an
  // intersection there made a sink of the wrong items a wall of its members, where `Sink<A>` against `Sink<B>` says it.
  const sink: Sink<Record<string, unknown>> & { readonly table: string } = {
    kind: 'sqlite',
    path,
    id,
    table: config.table,
    terms: { file: path, table: config.table, mode: config.mode, columns: config.columns ?? 'default' },
    ...tableMembers(table, `sqlite:${path}`),
  };
  return sink;
}

/** The table from `open` to `close`: its connection, its page insert, and how it is written on its own. */
interface OpenTable {
  db: Database.Database;
  insert: RowInsert;
  rowValues: (item: Record<string, unknown>, into: unknown[]) => void;
  writeAlone: (rows: SqliteRows, seq: number) => void;
  /** A table with the default columns keeps how each series ended beside it (series-outcomes.ts). */
  outcomes: SqliteOutcomes | undefined;
  /** And, when it tracks domains, their ranks (series-tracked.ts). */
  tracked: SqliteTracked | undefined;
}

/** The SQLite table behind the sink: where it is, its columns, the last page it holds, and the run that writes it. */
class SqliteTable {
  readonly path: string;
  readonly id: string;
  readonly #config: z.output<typeof sqliteSinkOptionsSchema>;
  /** Its own columns, or the normalized item's and the run's tag columns (known once the run opens it). */
  #columns: readonly string[];
  #opened: OpenTable | undefined;
  /** One writer per table at a time, whichever pipeline: the lease lives in the database itself. */
  #lease: Lease | undefined;
  /** The sequence number of the last page the table holds. */
  #held = 0;

  constructor(config: z.output<typeof sqliteSinkOptionsSchema>) {
    this.#config = config;
    this.#columns = config.columns ?? DEFAULT_COLUMNS;
    this.path = resolve(config.path);
    this.id = `sqlite:${this.path}#${config.table}`;
  }

  get held(): number {
    return this.#held;
  }

  open(ctx: SinkContext): void {
    const { table, mode, columns: own } = this.#config;
    mkdirSync(dirname(this.path), { recursive: true });
    const db = ctx.database(this.path);
    this.#lease = leaseOutput(db, { key: `table:${table}`, label: `the table "${table}" of ${this.path}` }, ctx.pipeline);
    if (!own) this.#columns = [...DEFAULT_COLUMNS, ...ctx.tagColumns];
    const columns = this.#columns;
    if (mode === 'upsert') {
      if (!own) checkUpsertTags(ctx.tagColumns, 'Invalid SQLite sink', 'sqlite.mode');
      const lacking = UPSERT_KEY.filter((c) => !columns.includes(c));
      if (lacking.length > 0) throw new ValidationError('Invalid SQLite sink', [{ path: 'sqlite.columns', message: `upsert needs the key columns ${lacking.join(', ')}` }]);
    }
    const stored = mode === 'upsert' ? [...columns, ...UPSERT_COLUMNS] : columns;
    prepareTable(db, table, stored, ctx.tagColumns);
    if (mode === 'upsert') uniqueKey(db, table);
    if (!own) {
      prepareSqliteOutcomes(db, table, ctx.runId);
      if (ctx.tracked) prepareSqliteTracked(db, table);
      ctx.resultsTable?.({ kind: 'sqlite', db }, table, mode);
    }
    const checkpoints = sinkCheckpoints(db);
    const existing = checkpoints.get(this.id);
    if (existing) this.#held = existing.seq;
    else {
      // Seen for the first time: it holds nothing of the past, and owes nothing of it either.
      this.#held = ctx.currentSeq;
      checkpoints.set(this.id, { seq: this.#held, bytes: null });
    }
    const rowValues =
      mode === 'upsert'
        ? (item: Record<string, unknown>, into: unknown[]) => {
            for (const column of columns) into.push(sqlValue(item[column]));
            into.push(sqlValue(item.fetched_at), sqlValue(item.fetched_at), sqlValue(item.run_id));
          }
        : (item: Record<string, unknown>, into: unknown[]) => {
            for (const column of columns) into.push(sqlValue(item[column]));
          };
    const insertValues = rowInserter(db);
    // Rows and the checkpoint in one transaction: the page is in the table wholly, and known to be, or not at all.
    const writeAlone = db.transaction((rows: SqliteRows, seq: number) => {
      insertValues(rows.insert, rows.values);
      checkpoints.set(this.id, { seq, bytes: null });
    });
    const insert = sqliteSinkStatements.insert(table, stored, mode === 'upsert');
    this.#opened = { db, insert, rowValues, writeAlone, outcomes: own ? undefined : sqliteOutcomes(db, table), tracked: own ? undefined : sqliteTracked(db, table) };
  }

  /** A page's rows, as data: the store writes them in the page's transaction, or `writeAlone` in one of the table's own. */
  rows(page: Page<Record<string, unknown>>): SqliteRows {
    const { insert, rowValues } = this.#ready();
    if (!this.#config.columns) checkNormalized(page.items[0], `The SQLite sink ${this.path}`);
    const values: unknown[] = [];
    for (const item of page.items) rowValues(item, values);
    return { kind: 'sqlite', sinkId: this.id, insert, values };
  }

  writeAlone(rows: SqliteRows, seq: number): void {
    this.#ready().writeAlone(rows, seq);
  }

  committed(seq: number): void {
    this.#held = seq;
  }

  outcomes(runId: string, outcomes: readonly SeriesOutcome[]): void {
    this.#ready().outcomes?.record(runId, outcomes);
  }

  tracked(runId: string, rows: readonly TrackedRow[]): void {
    this.#ready().tracked?.record(runId, rows);
  }

  discard(runId: string): void {
    const { db, outcomes, tracked } = this.#ready();
    const { table, mode } = this.#config;
    // In upsert mode only the rows the abandoned run brought in go; rows it updated keep its values.
    const column = mode === 'upsert' ? 'first_run_id' : 'run_id';
    db.transaction(() => {
      if (mode === 'upsert' || this.#columns.includes('run_id')) db.prepare(sqliteSinkStatements.discardRun(table, column)).run(runId);
      outcomes?.discard(runId);
      tracked?.discard(runId);
    })();
  }

  finish(runId: string): void {
    const { db, outcomes, tracked } = this.#ready();
    // replace: the run finished, so the rows of earlier runs give way to it, all at once, and so do their outcomes.
    if (this.#config.mode === 'replace' && this.#columns.includes('run_id')) {
      db.transaction(() => {
        db.prepare(sqliteSinkStatements.keepOnlyRun(this.#config.table)).run(runId);
        outcomes?.keepOnly(runId);
        tracked?.keepOnly(runId);
      })();
    }
  }

  close(): void {
    this.#opened = undefined;
    this.#lease?.release();
    this.#lease = undefined;
  }

  #ready(): OpenTable {
    if (!this.#opened) throw new Error(`the SQLite sink ${this.path} was not opened`);
    return this.#opened;
  }
}

function prepareTable(db: Database.Database, table: string, columns: readonly string[], addable: readonly string[]): void {
  const version = db.pragma(sqliteSinkStatements.schemaVersion, { simple: true }) as number;
  if (version > RESULTS_SCHEMA_VERSION) {
    throw new ValidationError('Invalid SQLite sink', [
      { path: 'sqlite.path', message: `${db.name} was written by a newer webdata-etl (results schema ${version}; this one knows ${RESULTS_SCHEMA_VERSION}): upgrade webdata-etl, or use another file` },
    ]);
  }
  const existing = db.prepare(sqliteSinkStatements.tableColumns).pluck().all(table) as string[];
  if (existing.length > 0) {
    // Tag columns are the query list's to choose: a new one is added to the table, empty for earlier rows.
    for (const column of addable.filter((c) => !existing.includes(c))) {
      db.exec(sqliteSinkStatements.addColumn(table, column));
      existing.push(column);
    }
    const missing = columns.filter((c) => !existing.includes(c));
    if (missing.length > 0) {
      throw new ValidationError(`The table "${table}" in ${db.name} has other columns`, [
        { path: 'sqlite.table', message: `it lacks ${missing.join(', ')} (it has ${existing.join(', ')}): use another table or file, or the same columns` },
      ]);
    }
  }
  db.exec(sqliteSinkStatements.createTable(table, columns));
  // Two indexes, each paid for on every insert: the series with its runs (the views' latest-run lookups, and any
  // query by query, country and lang) and the dedupe key. A separate run_id index cost a third of the insert rate.
  const series = ['query', 'country', 'lang', 'run_id'].filter((c) => columns.includes(c));
  if (series.length >= 3) db.exec(sqliteSinkStatements.seriesIndex(table, series));
  if (columns.includes('dedupe_key')) db.exec(sqliteSinkStatements.dedupeKeyIndex(table));
  if (version < RESULTS_SCHEMA_VERSION) db.pragma(sqliteSinkStatements.setSchemaVersion(RESULTS_SCHEMA_VERSION));
}

/** One row per key: a unique index, which fails (clearly) on a table already holding several rows per key. */
function uniqueKey(db: Database.Database, table: string): void {
  try {
    db.exec(sqliteSinkStatements.upsertKeyIndex(table));
  } catch (error) {
    throw new ValidationError(`The table "${table}" in ${db.name} cannot take upserts`, [
      { path: 'sqlite.mode', message: `it holds several rows per (query, country, lang, dedupe_key) — written in append mode? Use another table for upsert (${(error as Error).message})` },
    ]);
  }
}
