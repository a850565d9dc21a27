import type Database from 'better-sqlite3';
import { ValidationError } from '../../errors/validation-error.ts';
import { KEY_ALLOWANCES_TABLES, KEY_LIMITS_TABLE } from './key-statements.ts';
import { NOTIFICATIONS_TABLE, OCCURRENCES_TABLE, RUN_TABLES, SCHEMA_SQL, SPEND_KEY_COLUMNS, SPEND_KEY_INDEX, SPEND_TABLE } from './statements.ts';

/** Tables the state store owns; a results table may not take these names. */
export const RESERVED_TABLES: ReadonlySet<string> = new Set([
  'webdata_meta',
  'runs',
  'series',
  'series_state',
  'pages',
  'spend',
  'sink_checkpoints',
  'run_sinks',
  'dedupe_keys',
  'sightings',
  'lease',
  'output_leases',
  'output_claims',
  'notifications',
  'occurrences',
  'key_limits',
  'key_allowances',
  'key_holds',
  // A view of the store's (analytics/views.ts), made beside its tables.
  'webdata_spend',
]);

/**
 * Bumped when the state tables change (2: stage states as a snapshot and each page's changes, `series_state`; 3: spend
 * of answers whose pages never committed, `spend.uncommitted`, and a run's terms, `runs.terms`; 4: notifications of
 * runs' ends, `notifications`; 5: scheduled occurrences and their claims, `occurrences`; 6: what keys learned of the server's limits, `key_limits`;
 * 7: keys' allowances and the credits held of them, `key_allowances` and `key_holds`, and spend by key and period, the
 * `spend` table's `key_fingerprint`, `key_label`, `pipeline` and `period`; 8: the day each request's spend falls on, on the
 * clocks of its key's allowance, `spend.day`, which webdata_spend groups by: SQLite knows no time zones).
 */
export const STATE_SCHEMA_VERSION = 8;

/**
 * Creates the state tables in a SQLite file, or brings an older file's up to this version and marks it, so that an
 * older webdata-etl refuses it rather than resume without what it cannot read; a newer one's, or another program's
 * tables of our names, are refused before anything changes.
 */
export function migrate(db: Database.Database): void {
  // One process at a time: two workers starting together on a new file both found no version and both inserted it
  // (UNIQUE constraint failed: webdata_meta.key). BEGIN IMMEDIATE takes the write lock first; the other waits for it
  // (the connection's busy timeout), then finds the file made.
  db.transaction(() => migrateInTransaction(db)).immediate();
}

function migrateInTransaction(db: Database.Database): void {
  refuseNewerSchema(db);
  // Each role's tables (statements.ts).
  for (const tables of [RUN_TABLES, SPEND_TABLE, NOTIFICATIONS_TABLE, OCCURRENCES_TABLE, KEY_LIMITS_TABLE, KEY_ALLOWANCES_TABLES]) db.exec(tables);
  const version = db.prepare(SCHEMA_SQL.version).pluck().get() as string | undefined;
  // Each version so far only added tables or columns: an older file is brought up by the CREATEs above and the columns
  // below, then marked, so that an older webdata-etl refuses it rather than resume without what it cannot read.
  addColumn(db, 'spend', 'uncommitted', 'INTEGER NOT NULL DEFAULT 0');
  addColumn(db, 'runs', 'terms', 'TEXT');
  for (const [column, declaration] of SPEND_KEY_COLUMNS) addColumn(db, 'spend', column, declaration);
  db.exec(SPEND_KEY_INDEX);
  addColumn(db, 'spend', 'day', 'TEXT');
  if (version === undefined) db.prepare(SCHEMA_SQL.insertVersion).run(String(STATE_SCHEMA_VERSION));
  else if (Number(version) < STATE_SCHEMA_VERSION) db.prepare(SCHEMA_SQL.updateVersion).run(String(STATE_SCHEMA_VERSION));
  db.prepare(SCHEMA_SQL.startJournal).run();
}

/**
 * A store of a newer webdata-etl, or another program's database with tables of our names, is refused before anything
 * in it changes (this one would create its own tables in it).
 */
function refuseNewerSchema(db: Database.Database): void {
  const hasMeta = db.prepare(SCHEMA_SQL.hasMeta).get() !== undefined;
  if (!hasMeta) {
    // Tables of our names in a database we never wrote are another program's: reading its "runs" as ours would
    // resume nonsense, writing ours into it would corrupt its data.
    const names = ['runs', 'series', 'pages', 'spend', 'run_sinks'];
    const foreign = db.prepare(SCHEMA_SQL.present(names.length)).pluck().all(...names) as string[];
    if (foreign.length > 0) {
      throw new ValidationError('Invalid state store', [
        {
          path: 'state.path',
          message: `${db.name} holds ${foreign.join(', ')} of another program (it has no webdata_meta table, so webdata-etl never wrote it): give the pipeline another state file (state.path, or the SQLite sink's path)`,
        },
      ]);
    }
  }
  const version = hasMeta ? (db.prepare(SCHEMA_SQL.version).pluck().get() as string | undefined) : undefined;
  if (version !== undefined && Number(version) > STATE_SCHEMA_VERSION) {
    throw new ValidationError('Invalid state store', [
      {
        path: 'state.path',
        message: `${db.name} holds state written by a newer webdata-etl (state schema ${version}; this one knows ${STATE_SCHEMA_VERSION}): upgrade webdata-etl, or give the pipeline another state file`,
      },
    ]);
  }
}

/** Adds a column an older file's table lacks (its name and declaration are ours, never a user's). */
function addColumn(db: Database.Database, table: string, column: string, declaration: string): void {
  const columns = db.prepare(SCHEMA_SQL.columnsOf).pluck().all(table) as string[];
  if (!columns.includes(column)) db.exec(SCHEMA_SQL.addColumn(table, column, declaration));
}
