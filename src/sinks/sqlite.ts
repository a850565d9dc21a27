import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import type { Page } from '../pipeline/page.ts';
import { RESERVED_TABLES } from '../state/sqlite/schema.ts';
import { checkNormalized, checkUpsertTags, columnName, DEFAULT_COLUMNS, sqlType, sqlValue, UPSERT_COLUMNS, UPSERT_KEY, upsertColumnsFree } from './columns.ts';
import type { OwnColumns } from './columns.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';
import { sinkCheckpoints } from '../state/sqlite/checkpoints.ts';
import { leaseOutput } from '../state/sqlite/lease.ts';
import { quoteIdentifier as q } from '../sql-identifier.ts';
import type { Lease } from '../state/interfaces.ts';
import { type RowInsert, rowInserter } from '../commits/row-insert.ts';
import { prepareSqliteOutcomes, type SqliteOutcomes, sqliteOutcomes } from './sqlite-outcomes.ts';
import type { Sink, SinkContext, SqliteRows } from './sink.ts';

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
  const { table, mode } = config;
  let columns: readonly string[] = config.columns ?? DEFAULT_COLUMNS;
  const path = resolve(config.path);
  const id = `sqlite:${path}#${table}`;
  let opened:
    | {
        db: Database.Database;
        insert: RowInsert;
        rowValues: (item: Record<string, unknown>, into: unknown[]) => void;
        writeAlone: (rows: SqliteRows, seq: number) => void;
        /** A table with the default columns keeps how each series ended beside it (series-outcomes.ts). */
        outcomes: SqliteOutcomes | undefined;
      }
    | undefined;
  let lease: Lease | undefined;
  let held = 0;

  const ready = () => {
    if (!opened) throw new Error(`the SQLite sink ${path} was not opened`);
    return opened;
  };

  // The table is for the run's check that no two outputs are one (run/outputs.ts), not in the declared type: an
  // intersection there made a sink of the wrong items a wall of its members, where `Sink<A>` against `Sink<B>` says it.
  const sink: Sink<Record<string, unknown>> & { readonly table: string } = {
    kind: 'sqlite',
    path,
    id,
    table,
    terms: { file: path, table, mode, columns: config.columns ?? 'default' },
    commits: {
      kind: 'rows',
      database: `sqlite:${path}`,
      rows(page: Page<Record<string, unknown>>): SqliteRows {
        const { insert, rowValues } = ready();
        if (!config.columns) checkNormalized(page.items[0], `The SQLite sink ${path}`);
        const values: unknown[] = [];
        for (const item of page.items) rowValues(item, values);
        return { kind: 'sqlite', sinkId: id, insert, values };
      },
      writeAlone: (rows, seq) => ready().writeAlone(rows as SqliteRows, seq),
      committed(seq) {
        held = seq;
      },
    },
    open(ctx: SinkContext) {
      mkdirSync(dirname(path), { recursive: true });
      const db = ctx.database(path);
      // One writer per table at a time, whichever pipeline: the lease lives in the database itself.
      lease = leaseOutput(db, { key: `table:${table}`, label: `the table "${table}" of ${path}` }, ctx.pipeline);
      if (!config.columns) columns = [...DEFAULT_COLUMNS, ...ctx.tagColumns];
      if (mode === 'upsert') {
        if (!config.columns) checkUpsertTags(ctx.tagColumns, 'Invalid SQLite sink', 'sqlite.mode');
        const lacking = UPSERT_KEY.filter((c) => !columns.includes(c));
        if (lacking.length > 0) throw new ValidationError('Invalid SQLite sink', [{ path: 'sqlite.columns', message: `upsert needs the key columns ${lacking.join(', ')}` }]);
      }
      const stored = mode === 'upsert' ? [...columns, ...UPSERT_COLUMNS] : columns;
      prepareTable(db, table, stored, ctx.tagColumns);
      if (mode === 'upsert') uniqueKey(db, table);
      if (!config.columns) {
        prepareSqliteOutcomes(db, table, ctx.runId);
        ctx.resultsTable?.({ kind: 'sqlite', db }, table, mode);
      }
      const checkpoints = sinkCheckpoints(db);
      const existing = checkpoints.get(id);
      if (existing) held = existing.seq;
      else {
        // Seen for the first time: it holds nothing of the past, and owes nothing of it either.
        held = ctx.currentSeq;
        checkpoints.set(id, { seq: held, bytes: null });
      }
      const insert: RowInsert = { into: `INSERT INTO ${q(table)} (${stored.map(q).join(', ')})`, width: stored.length, then: mode === 'upsert' ? upsertClause(columns) : '' };
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
        checkpoints.set(id, { seq, bytes: null });
      });
      opened = { db, insert, rowValues, writeAlone, outcomes: config.columns ? undefined : sqliteOutcomes(db, table) };
    },
    held: () => held,
    outcomes(runId, outcomes) {
      ready().outcomes?.record(runId, outcomes);
    },
    discard(runId) {
      const { db, outcomes } = ready();
      // In upsert mode only the rows the abandoned run brought in go; rows it updated keep its values.
      const column = mode === 'upsert' ? 'first_run_id' : 'run_id';
      db.transaction(() => {
        if (mode === 'upsert' || columns.includes('run_id')) db.prepare(`DELETE FROM ${q(table)} WHERE ${q(column)} = ?`).run(runId);
        outcomes?.discard(runId);
      })();
    },
    finish(runId) {
      const { db, outcomes } = ready();
      // replace: the run finished, so the rows of earlier runs give way to it, all at once, and so do their outcomes.
      if (mode === 'replace' && columns.includes('run_id')) {
        db.transaction(() => {
          db.prepare(`DELETE FROM ${q(table)} WHERE run_id <> ?`).run(runId);
          outcomes?.keepOnly(runId);
        })();
      }
    },
    close() {
      opened = undefined;
      lease?.release();
      lease = undefined;
    },
  };
  return sink;
}

function prepareTable(db: Database.Database, table: string, columns: readonly string[], addable: readonly string[]): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > RESULTS_SCHEMA_VERSION) {
    throw new ValidationError('Invalid SQLite sink', [
      { path: 'sqlite.path', message: `${db.name} was written by a newer webdata-etl (results schema ${version}; this one knows ${RESULTS_SCHEMA_VERSION}): upgrade webdata-etl, or use another file` },
    ]);
  }
  const existing = db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(table) as string[];
  if (existing.length > 0) {
    // Tag columns are the query list's to choose: a new one is added to the table, empty for earlier rows.
    for (const column of addable.filter((c) => !existing.includes(c))) {
      db.exec(`ALTER TABLE ${q(table)} ADD COLUMN ${q(column)} TEXT`);
      existing.push(column);
    }
    const missing = columns.filter((c) => !existing.includes(c));
    if (missing.length > 0) {
      throw new ValidationError(`The table "${table}" in ${db.name} has other columns`, [
        { path: 'sqlite.table', message: `it lacks ${missing.join(', ')} (it has ${existing.join(', ')}): use another table or file, or the same columns` },
      ]);
    }
  }
  db.exec(`CREATE TABLE IF NOT EXISTS ${q(table)} (${columns.map((c) => `${q(c)} ${sqlType(c)}`.trim()).join(', ')})`);
  // Two indexes, each paid for on every insert: the series with its runs (the views' latest-run lookups, and any
  // query by query, country and lang) and the dedupe key. A separate run_id index cost a third of the insert rate.
  const series = ['query', 'country', 'lang', 'run_id'].filter((c) => columns.includes(c));
  if (series.length >= 3) db.exec(`CREATE INDEX IF NOT EXISTS ${q(`${table}_series`)} ON ${q(table)} (${series.map(q).join(', ')})`);
  if (columns.includes('dedupe_key')) db.exec(`CREATE INDEX IF NOT EXISTS ${q(`${table}_dedupe_key`)} ON ${q(table)} (dedupe_key)`);
  if (version < RESULTS_SCHEMA_VERSION) db.pragma(`user_version = ${RESULTS_SCHEMA_VERSION}`);
}

/** One row per key: a unique index, which fails (clearly) on a table already holding several rows per key. */
function uniqueKey(db: Database.Database, table: string): void {
  try {
    db.exec(`CREATE UNIQUE INDEX IF NOT EXISTS ${q(`${table}_upsert_key`)} ON ${q(table)} (${UPSERT_KEY.map(q).join(', ')})`);
  } catch (error) {
    throw new ValidationError(`The table "${table}" in ${db.name} cannot take upserts`, [
      { path: 'sqlite.mode', message: `it holds several rows per (query, country, lang, dedupe_key) — written in append mode? Use another table for upsert (${(error as Error).message})` },
    ]);
  }
}

/** What makes an insert an upsert: update the row with the same key, everything but the key and when it was first seen. */
function upsertClause(columns: readonly string[]): string {
  const updated = [...columns, ...UPSERT_COLUMNS].filter((c) => !UPSERT_KEY.includes(c) && c !== 'first_seen' && c !== 'first_run_id');
  return ` ON CONFLICT (${UPSERT_KEY.map(q).join(', ')}) DO UPDATE SET ${updated.map((c) => `${q(c)} = excluded.${q(c)}`).join(', ')}`;
}
