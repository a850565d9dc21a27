import type Database from 'better-sqlite3';
import { ValidationError } from '../../errors/validation-error.ts';

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
]);

/**
 * Bumped when the state tables change (2: stage states as a snapshot and each page's changes, `series_state`; 3: spend
 * of answers whose pages never committed, `spend.uncommitted`, and a run's terms, `runs.terms`; 4: notifications of
 * runs' ends, `notifications`; 5: scheduled occurrences and their claims, `occurrences`).
 */
export const STATE_SCHEMA_VERSION = 5;

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
  db.exec(`
    CREATE TABLE IF NOT EXISTS webdata_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS runs (
      run_id TEXT PRIMARY KEY,
      pipeline TEXT NOT NULL,
      status TEXT NOT NULL,
      started_at TEXT NOT NULL,
      finished_at TEXT,
      fingerprint TEXT NOT NULL,
      plan TEXT NOT NULL,
      budget REAL,
      summary TEXT,
      error TEXT,
      invocations INTEGER NOT NULL DEFAULT 1,
      -- What else decides the run's money and rows (run/run-terms.ts), as JSON; null for runs of schema 2 and before.
      terms TEXT
    );
    CREATE INDEX IF NOT EXISTS runs_pipeline ON runs (pipeline, started_at);
    CREATE TABLE IF NOT EXISTS series (
      run_id TEXT NOT NULL,
      series_id TEXT NOT NULL,
      endpoint TEXT NOT NULL,
      query TEXT NOT NULL,
      country TEXT NOT NULL,
      lang TEXT NOT NULL,
      status TEXT NOT NULL,
      reason TEXT,
      next_page INTEGER,
      pages INTEGER NOT NULL DEFAULT 0,
      items_served INTEGER NOT NULL DEFAULT 0,
      items_written INTEGER NOT NULL DEFAULT 0,
      duplicates INTEGER NOT NULL DEFAULT 0,
      digest TEXT,
      no_new INTEGER NOT NULL DEFAULT 0,
      cursor TEXT,
      state TEXT,
      error TEXT,
      -- The class of the failure (bad_request, rate_limited, server, …) when the series failed.
      error_kind TEXT,
      PRIMARY KEY (run_id, series_id)
    );
    -- What each page changed in its series' stage states since the series' snapshot (series.state), in journal order.
    CREATE TABLE IF NOT EXISTS series_state (
      run_id TEXT NOT NULL,
      series_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      changes TEXT NOT NULL,
      PRIMARY KEY (run_id, series_id, seq)
    );
    CREATE TABLE IF NOT EXISTS pages (
      seq INTEGER PRIMARY KEY,
      run_id TEXT NOT NULL,
      page_key TEXT NOT NULL,
      series_id TEXT NOT NULL,
      number INTEGER NOT NULL,
      meta TEXT NOT NULL,
      output TEXT NOT NULL,
      -- The items as served: kept only when the journal is kept (retention), as an archive of raw answers.
      raw TEXT,
      committed_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS pages_run ON pages (run_id, seq);
    CREATE TABLE IF NOT EXISTS spend (
      id INTEGER PRIMARY KEY,
      run_id TEXT NOT NULL,
      at TEXT NOT NULL,
      series_id TEXT NOT NULL,
      path TEXT NOT NULL,
      attempt INTEGER NOT NULL,
      status TEXT NOT NULL,
      credits REAL NOT NULL,
      uncertain INTEGER NOT NULL,
      latency_ms REAL NOT NULL,
      -- 1: a 2xx whose page was never committed (paid all the same; the page is fetched again on resume).
      uncommitted INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS spend_run ON spend (run_id);
    -- A notification of a run's end for one webhook (docs/notifications.md): pending (with the body it sends) until
    -- delivered or given up. The webhook is a hash of its URL, the target its origin and path: never its query string.
    CREATE TABLE IF NOT EXISTS notifications (
      run_id TEXT NOT NULL,
      invocation INTEGER NOT NULL,
      webhook TEXT NOT NULL,
      pipeline TEXT NOT NULL,
      target TEXT NOT NULL,
      event TEXT NOT NULL,
      status TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      error TEXT,
      body TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      PRIMARY KEY (run_id, invocation, webhook)
    );
    CREATE INDEX IF NOT EXISTS notifications_pending ON notifications (pipeline, status);
    CREATE TABLE IF NOT EXISTS run_sinks (
      run_id TEXT NOT NULL,
      sink_id TEXT NOT NULL,
      start_seq INTEGER NOT NULL,
      start_bytes INTEGER,
      PRIMARY KEY (run_id, sink_id)
    );
    -- A schedule's occurrences, one row per (pipeline, due time), each claimed once whatever the number of workers
    -- (docs/design.md#schedules). due_at is ISO 8601 in UTC to the millisecond, so that text order is time order.
    CREATE TABLE IF NOT EXISTS occurrences (
      pipeline TEXT NOT NULL,
      due_at TEXT NOT NULL,
      outcome TEXT NOT NULL,
      run_id TEXT,
      worker TEXT,
      claimed_at TEXT NOT NULL,
      note TEXT,
      PRIMARY KEY (pipeline, due_at)
    );
    CREATE INDEX IF NOT EXISTS occurrences_run ON occurrences (run_id) WHERE run_id IS NOT NULL;
  `);
  const version = db.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get() as string | undefined;
  // Each version so far only added tables or columns: an older file is brought up by the CREATEs above and the columns
  // below, then marked, so that an older webdata-etl refuses it rather than resume without what it cannot read.
  addColumn(db, 'spend', 'uncommitted', 'INTEGER NOT NULL DEFAULT 0');
  addColumn(db, 'runs', 'terms', 'TEXT');
  if (version === undefined) db.prepare(`INSERT INTO webdata_meta (key, value) VALUES ('state_schema', ?)`).run(String(STATE_SCHEMA_VERSION));
  else if (Number(version) < STATE_SCHEMA_VERSION) db.prepare(`UPDATE webdata_meta SET value = ? WHERE key = 'state_schema'`).run(String(STATE_SCHEMA_VERSION));
  db.prepare(`INSERT OR IGNORE INTO webdata_meta (key, value) VALUES ('seq', '0')`).run();
}

/**
 * A store of a newer webdata-etl, or another program's database with tables of our names, is refused before anything
 * in it changes (this one would create its own tables in it).
 */
function refuseNewerSchema(db: Database.Database): void {
  const hasMeta = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'webdata_meta'`).get() !== undefined;
  if (!hasMeta) {
    // Tables of our names in a database we never wrote are another program's: reading its "runs" as ours would
    // resume nonsense, writing ours into it would corrupt its data.
    const names = ['runs', 'series', 'pages', 'spend', 'run_sinks'];
    const foreign = db.prepare(`SELECT name FROM sqlite_master WHERE name IN (${names.map(() => '?').join(', ')}) ORDER BY name`).pluck().all(...names) as string[];
    if (foreign.length > 0) {
      throw new ValidationError('Invalid state store', [
        {
          path: 'state.path',
          message: `${db.name} holds ${foreign.join(', ')} of another program (it has no webdata_meta table, so webdata-etl never wrote it): give the pipeline another state file (state.path, or the SQLite sink's path)`,
        },
      ]);
    }
  }
  const version = hasMeta ? (db.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get() as string | undefined) : undefined;
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
  const columns = db.prepare(`SELECT name FROM pragma_table_info(?)`).pluck().all(table) as string[];
  if (!columns.includes(column)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${declaration}`);
}
