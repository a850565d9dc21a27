import type Database from 'better-sqlite3';
import { UNFINISHED_SQL } from '../interfaces.ts';

/**
 * Every statement the SQLite state store sends, by name and by role, so that a reader sees what the store asks of the
 * file in one place: the tables each role keeps (created by `schema.ts`, or where they are first needed), the roles'
 * statements prepared once on a connection, and the texts the lease, the output registry, checkpoints and dedupe
 * prepare where they are used. Names in them are ours, never a user's.
 */

/** Runs and pages: the store's version and journal number, runs, series and their stage state, the journal, sink starts. */
export const RUN_TABLES = `
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
  CREATE TABLE IF NOT EXISTS run_sinks (
    run_id TEXT NOT NULL,
    sink_id TEXT NOT NULL,
    start_seq INTEGER NOT NULL,
    start_bytes INTEGER,
    PRIMARY KEY (run_id, sink_id)
  );
`;

/** Spend: one row per request answered or failed. */
export const SPEND_TABLE = `
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
`;

/**
 * Spend by key and period (state schema 7): the key's fingerprint and label, the pipeline, and the allowance's period
 * the credits were held in (null: the key has no allowance); null in rows written before. Added by `schema.ts` to an
 * older file's table, then indexed: what a key spent in a period is summed from the ledger.
 */
export const SPEND_KEY_COLUMNS = [
  ['key_fingerprint', 'TEXT'],
  ['key_label', 'TEXT'],
  ['pipeline', 'TEXT'],
  ['period', 'TEXT'],
] as const;
export const SPEND_KEY_INDEX = `CREATE INDEX IF NOT EXISTS spend_key_period ON spend (key_fingerprint, period, credits) WHERE period IS NOT NULL`;

/**
 * Notifications: one per run's end (or missed occurrences) and webhook (docs/notifications.md), pending (with the body
 * it sends) until delivered or given up. The webhook is a hash of its URL, the target its origin and path: never its
 * query string.
 */
export const NOTIFICATIONS_TABLE = `
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
`;

/**
 * A schedule's occurrences, one row per (pipeline, due time), each claimed once whatever the number of workers
 * (docs/design.md#schedules). due_at is ISO 8601 in UTC to the millisecond, so that text order is time order.
 */
export const OCCURRENCES_TABLE = `
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
`;

/** What `schema.ts` asks of a file as it creates or brings up its tables. */
export const SCHEMA_SQL = {
  hasMeta: `SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'webdata_meta'`,
  /** Which of `count` names are tables (or anything else) of the file. */
  present: (count: number) => `SELECT name FROM sqlite_master WHERE name IN (${Array.from({ length: count }, () => '?').join(', ')}) ORDER BY name`,
  version: `SELECT value FROM webdata_meta WHERE key = 'state_schema'`,
  insertVersion: `INSERT INTO webdata_meta (key, value) VALUES ('state_schema', ?)`,
  updateVersion: `UPDATE webdata_meta SET value = ? WHERE key = 'state_schema'`,
  startJournal: `INSERT OR IGNORE INTO webdata_meta (key, value) VALUES ('seq', '0')`,
  columnsOf: `SELECT name FROM pragma_table_info(?)`,
  addColumn: (table: string, column: string, declaration: string) => `ALTER TABLE ${table} ADD COLUMN ${column} ${declaration}`,
} as const;

/** Runs and pages, prepared once on the store's connection (and on its commit thread's). */
export function runStatements(db: Database.Database) {
  const prepared = {
    insertRun: db.prepare(`INSERT INTO runs (run_id, pipeline, status, started_at, fingerprint, plan, budget, terms) VALUES (?, ?, 'running', ?, ?, ?, ?, ?)`),
    reopenRun: db.prepare(
      `UPDATE runs SET status = 'running', finished_at = NULL, error = NULL, budget = ?, terms = coalesce(?, terms), invocations = invocations + 1 WHERE run_id = ?`,
    ),
    finishRun: db.prepare(`UPDATE runs SET status = ?, finished_at = ?, summary = ?, error = ? WHERE run_id = ?`),
    // In the order runs were recorded, not by the clock that wrote `started_at` (a machine's, which may be behind).
    latestRun: db.prepare(`SELECT * FROM runs WHERE pipeline = ? AND status <> 'abandoned' ORDER BY rowid DESC LIMIT 1`),
    runsOf: db.prepare(`SELECT * FROM runs WHERE pipeline = ? ORDER BY rowid`),
    nextSeq: db.prepare(`UPDATE webdata_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'seq' RETURNING CAST(value AS INTEGER) AS seq`).pluck(),
    currentSeq: db.prepare(`SELECT CAST(value AS INTEGER) FROM webdata_meta WHERE key = 'seq'`).pluck(),
    progress: db.prepare(`SELECT * FROM series WHERE run_id = ? AND series_id = ?`),
    commitSeries: db.prepare(`
      INSERT INTO series (run_id, series_id, endpoint, query, country, lang, status, reason, next_page, pages, items_served, items_written, duplicates, digest, no_new, cursor, state)
      VALUES (@runId, @seriesId, @endpoint, @query, @country, @lang, @status, @reason, @nextPage, 1, @served, @written, @duplicates, @digest, @noNew, @cursor, @snapshot)
      ON CONFLICT (run_id, series_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, next_page = excluded.next_page,
        pages = pages + 1, items_served = items_served + excluded.items_served, items_written = items_written + excluded.items_written,
        duplicates = duplicates + excluded.duplicates, digest = excluded.digest, no_new = excluded.no_new, cursor = excluded.cursor,
        state = CASE WHEN @isSnapshot THEN excluded.state ELSE series.state END, error = NULL`),
    stateChanges: db.prepare(`SELECT changes FROM series_state WHERE run_id = ? AND series_id = ? ORDER BY seq`).pluck(),
    /** `progress` and `stateChanges` of a slice of series (`?`: the run, the series' ids as a JSON array). */
    progresses: db.prepare(`SELECT * FROM series WHERE run_id = ? AND series_id IN (SELECT value FROM json_each(?))`),
    statesChanges: db.prepare(`SELECT series_id, changes FROM series_state WHERE run_id = ? AND series_id IN (SELECT value FROM json_each(?)) ORDER BY series_id, seq`),
    addStateChanges: db.prepare(`INSERT INTO series_state (run_id, series_id, seq, changes) VALUES (?, ?, ?, ?)`),
    dropStateChanges: db.prepare(`DELETE FROM series_state WHERE run_id = ? AND series_id = ?`),
    dropRunStateChanges: db.prepare(`DELETE FROM series_state WHERE run_id = ?`),
    endSeries: db.prepare(`
      INSERT INTO series (run_id, series_id, endpoint, query, country, lang, status, reason, next_page, error, error_kind)
      VALUES (@runId, @seriesId, @endpoint, @query, @country, @lang, @status, @reason, @nextPage, @error, @errorKind)
      ON CONFLICT (run_id, series_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, error = excluded.error, error_kind = excluded.error_kind,
        next_page = COALESCE(excluded.next_page, series.next_page)`),
    seriesTotals: db.prepare(`
      SELECT COALESCE(SUM(pages), 0) AS pages, COALESCE(SUM(items_served), 0) AS served, COALESCE(SUM(items_written), 0) AS written,
             COALESCE(SUM(duplicates), 0) AS duplicates, COALESCE(SUM(MAX(items_served - items_written - duplicates, 0)), 0) AS dropped
        FROM series WHERE run_id = ?`),
    seriesEnds: db.prepare(`SELECT status, reason, COUNT(*) AS n FROM series WHERE run_id = ? GROUP BY status, reason`),
    // The ids as one JSON array: one statement whatever their number.
    seriesStatuses: db.prepare(`SELECT series_id AS seriesId, status, reason FROM series WHERE run_id = ? AND series_id IN (SELECT value FROM json_each(?))`),
    reachedStatuses: db.prepare(`SELECT series_id AS seriesId, status, reason FROM series WHERE run_id = ? AND series_id > ? ORDER BY series_id LIMIT ?`),
    failedKinds: db.prepare(`SELECT COALESCE(error_kind, 'error') AS kind, COUNT(*) AS n FROM series WHERE run_id = ? AND status = 'ended' AND reason = 'failed' GROUP BY kind`),
    insertPage: db.prepare(`INSERT INTO pages (seq, run_id, page_key, series_id, number, meta, output, raw, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    journalAfter: db.prepare(`SELECT * FROM pages WHERE seq > ? ORDER BY seq LIMIT 256`),
    prune: db.prepare(`DELETE FROM pages WHERE seq <= ?`),
    dropRunPages: db.prepare(`DELETE FROM pages WHERE run_id = ?`),
    dropRunSeries: db.prepare(`DELETE FROM series WHERE run_id = ?`),
    markAbandoned: db.prepare(`UPDATE runs SET status = 'abandoned', finished_at = ? WHERE run_id = ?`),
    runSinkStart: db.prepare(`INSERT OR IGNORE INTO run_sinks (run_id, sink_id, start_seq, start_bytes) VALUES (?, ?, ?, ?)`),
    runSinks: db.prepare(`SELECT sink_id, start_seq, start_bytes FROM run_sinks WHERE run_id = ?`),
  };
  // Named by their keys, typed as statements (a declaration file cannot name better-sqlite3's inferred class).
  return prepared as Record<keyof typeof prepared, Database.Statement>;
}

/** Spend: a row written (with its day, state schema 8), and a run's totals. */
export function spendStatements(db: Database.Database) {
  const prepared = {
    insertSpend: db.prepare(
      `INSERT INTO spend (run_id, at, series_id, path, attempt, status, credits, uncertain, latency_ms, uncommitted, key_fingerprint, key_label, pipeline, period, day) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    spendOf: db.prepare(`SELECT COALESCE(SUM(credits), 0) AS spent, COALESCE(SUM(CASE WHEN uncertain = 1 THEN credits ELSE 0 END), 0) AS uncertain, COALESCE(SUM(CASE WHEN uncommitted = 1 THEN credits ELSE 0 END), 0) AS uncommitted, COUNT(*) AS requests, COALESCE(SUM(CASE WHEN attempt > 1 THEN 1 ELSE 0 END), 0) AS retries FROM spend WHERE run_id = ?`),
    spendByStatus: db.prepare(`SELECT status, COUNT(*) AS n FROM spend WHERE run_id = ? GROUP BY status`),
    spendByPath: db.prepare(`SELECT path, SUM(credits) AS credits FROM spend WHERE run_id = ? AND credits > 0 GROUP BY path`),
    /** The zone of a key's allowance (`?`: its fingerprint), which a spend row's day is read in (spend-day.ts). */
    zoneOf: db.prepare(`SELECT timezone FROM key_allowances WHERE fingerprint = ?`).pluck(),
  };
  return prepared as Record<keyof typeof prepared, Database.Statement>;
}

/** Notifications, and the failed series a run's notification lists. */
export function notificationStatements(db: Database.Database) {
  const prepared = {
    failedSeries: db.prepare(
      `SELECT series_id, endpoint, query, country, lang, error_kind, error FROM series WHERE run_id = ? AND status = 'ended' AND reason = 'failed' ORDER BY query, country, lang, series_id LIMIT ?`,
    ),
    claimNotification: db.prepare(`
      INSERT INTO notifications (run_id, invocation, webhook, pipeline, target, event, status, attempts, body, created_at, updated_at)
      VALUES (@runId, @invocation, @webhook, @pipeline, @target, @event, 'pending', 0, @body, @createdAt, @createdAt) ON CONFLICT DO NOTHING`),
    settleNotification: db.prepare(`
      UPDATE notifications SET status = @status, attempts = attempts + @attempts, error = @error, updated_at = @at,
        body = CASE WHEN @status = 'pending' THEN body ELSE NULL END
      WHERE run_id = @runId AND invocation = @invocation AND webhook = @webhook`),
    // Owed: pending, or taken by a process that did not settle it by @staleBefore (ISO text: text order is time order).
    pendingNotifications: db.prepare(`SELECT * FROM notifications WHERE pipeline = @pipeline AND (status = 'pending' OR (status = 'sending' AND updated_at < @staleBefore))
      ORDER BY created_at, rowid LIMIT @limit`),
    takeNotification: db.prepare(`UPDATE notifications SET status = 'sending', updated_at = @at
      WHERE run_id = @runId AND invocation = @invocation AND webhook = @webhook AND (status = 'pending' OR (status = 'sending' AND (updated_at < @staleBefore OR updated_at = @at)))`),
  };
  return prepared as Record<keyof typeof prepared, Database.Statement>;
}

/** Scheduled occurrences. */
export function occurrenceStatements(db: Database.Database) {
  const prepared = {
    // A claim is a row inserted once: the one whose insert took (changes = 1) holds it.
    claimOccurrence: db.prepare(`INSERT INTO occurrences (pipeline, due_at, outcome, worker, claimed_at, note) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
    settleOccurrence: db.prepare(
      `UPDATE occurrences SET outcome = @outcome, run_id = CASE WHEN @keepRun THEN run_id ELSE @runId END, note = CASE WHEN @keepNote THEN note ELSE @note END
        WHERE pipeline = @pipeline AND due_at = @dueAt`,
    ),
    // due_at is ISO text in UTC to the millisecond: text order is time order. @dueBy null: all.
    occurrences: db.prepare(`SELECT * FROM occurrences WHERE pipeline = @pipeline AND (@dueBy IS NULL OR due_at <= @dueBy) ORDER BY due_at DESC LIMIT @limit`),
    occurrenceOfRun: db.prepare(`SELECT * FROM occurrences WHERE pipeline = ? AND run_id = ? ORDER BY due_at DESC`),
    occurrenceAt: db.prepare(`SELECT * FROM occurrences WHERE pipeline = ? AND due_at = ?`),
    pruneOccurrences: db.prepare(`
      DELETE FROM occurrences WHERE pipeline = @pipeline AND run_id IS NULL AND outcome IN ('skipped', 'missed', 'failed')
        AND due_at <= (SELECT due_at FROM occurrences WHERE pipeline = @pipeline AND run_id IS NULL AND outcome IN ('skipped', 'missed', 'failed')
                       ORDER BY due_at DESC LIMIT 1 OFFSET @keep)`),
  };
  return prepared as Record<keyof typeof prepared, Database.Statement>;
}

/** Sink checkpoints, in whichever file the sink commits to (the state store's, or a SQLite sink's own). */
export const CHECKPOINT_SQL = {
  table: `CREATE TABLE IF NOT EXISTS sink_checkpoints (sink_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, bytes INTEGER, updated_at TEXT NOT NULL)`,
  get: `SELECT seq, bytes FROM sink_checkpoints WHERE sink_id = ?`,
  set: `
    INSERT INTO sink_checkpoints (sink_id, seq, bytes, updated_at) VALUES (?, ?, ?, ?)
    ON CONFLICT (sink_id) DO UPDATE SET seq = excluded.seq, bytes = excluded.bytes, updated_at = excluded.updated_at`,
} as const;

/** Dedupe keys of scopes wider than a series, and where items were seen. */
export const DEDUPE_SQL = {
  tables: `
    CREATE TABLE IF NOT EXISTS dedupe_keys (scope TEXT NOT NULL, key TEXT NOT NULL, run_id TEXT, PRIMARY KEY (scope, key)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS sightings (
      run_id TEXT NOT NULL,
      dedupe_key TEXT NOT NULL,
      query TEXT NOT NULL,
      country TEXT NOT NULL,
      lang TEXT NOT NULL,
      page INTEGER NOT NULL,
      position INTEGER NOT NULL,
      rank INTEGER,
      fetched_at TEXT NOT NULL,
      first INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS sightings_key ON sightings (dedupe_key);
    CREATE INDEX IF NOT EXISTS sightings_run ON sightings (run_id);
  `,
  lookup: `SELECT 1 FROM dedupe_keys WHERE scope = ? AND key = ?`,
  insertKey: `INSERT OR IGNORE INTO dedupe_keys (scope, key, run_id) VALUES (?, ?, ?)`,
  insertSighting: `INSERT INTO sightings (run_id, dedupe_key, query, country, lang, page, position, rank, fetched_at, first) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  forgetRun: `DELETE FROM dedupe_keys WHERE run_id = ?`,
  forgetFinished: `DELETE FROM dedupe_keys WHERE run_id IN (SELECT run_id FROM runs WHERE status NOT IN (${UNFINISHED_SQL}))`,
} as const;

/**
 * The leases: the state store's (`lease`, keyed by the pipeline: the table predates output leases, and old rows stay
 * readable) and the outputs' (`output_leases`). `table` and `k` are quoted.
 */
export const LEASE_SQL = {
  storeTable: `CREATE TABLE IF NOT EXISTS lease (pipeline TEXT PRIMARY KEY, holder TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, acquired_at TEXT NOT NULL, renewed_at INTEGER NOT NULL)`,
  outputTable: `CREATE TABLE IF NOT EXISTS output_leases (output TEXT PRIMARY KEY, pipeline TEXT NOT NULL, holder TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, acquired_at TEXT NOT NULL, renewed_at INTEGER NOT NULL)`,
  /** The holders: of the key `?` only (`only`), or every one. The store's table has no pipeline column: its key is the pipeline. */
  read: (table: string, k: string, hasPipeline: boolean, only: boolean) =>
    `SELECT ${k} AS key, ${hasPipeline ? 'pipeline' : `${k} AS pipeline`}, holder, pid, host, acquired_at, renewed_at FROM ${table} ${only ? `WHERE ${k} = ?` : ''}`,
  write: (table: string, k: string, hasPipeline: boolean) =>
    `INSERT INTO ${table} (${k}, ${hasPipeline ? 'pipeline, ' : ''}holder, pid, host, acquired_at, renewed_at) VALUES (?, ${hasPipeline ? '?, ' : ''}?, ?, ?, ?, ?)
     ON CONFLICT (${k}) DO UPDATE SET ${hasPipeline ? 'pipeline = excluded.pipeline, ' : ''}holder = excluded.holder, pid = excluded.pid,
       host = excluded.host, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at`,
  drop: (table: string, k: string) => `DELETE FROM ${table} WHERE ${k} = ? AND holder = ?`,
  renew: (table: string, k: string) => `UPDATE ${table} SET renewed_at = ? WHERE ${k} = ? AND holder = ?`,
} as const;

/** The output registry's claims: which pipelines write each file of a directory. */
export const CLAIM_SQL = {
  table: `CREATE TABLE IF NOT EXISTS output_claims (
    output TEXT NOT NULL, pipeline TEXT NOT NULL, state TEXT NOT NULL, shared INTEGER NOT NULL, dev TEXT, ino TEXT, claimed_at TEXT NOT NULL,
    PRIMARY KEY (output, pipeline, state))`,
  claims: `SELECT pipeline, state, shared, dev, ino FROM output_claims WHERE output = ?`,
  lapse: `DELETE FROM output_claims WHERE output = ? AND NOT (pipeline = ? AND state = ?)`,
  upsert: `
    INSERT INTO output_claims (output, pipeline, state, shared, dev, ino, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (output, pipeline, state) DO UPDATE SET shared = excluded.shared, dev = excluded.dev, ino = excluded.ino`,
} as const;
