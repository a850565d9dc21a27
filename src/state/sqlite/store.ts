import type Database from 'better-sqlite3';
import { OutputError } from '../../errors/output-error.ts';
import { ValidationError } from '../../errors/validation-error.ts';
import type { JournalEntry, JournalWrite, PageCommit, SharedTransaction, RunRecord, SeriesEndRecord, SeriesIdentity, SeriesProgress, SpendRow } from '../interfaces.ts';
import { sinkCheckpoints } from './checkpoints.ts';
import { acquireLease } from './lease.ts';
import { dedupeTables } from './seen-keys.ts';
import { journalEntryFrom, runRecordFrom, seriesProgressFrom } from '../rows.ts';

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
]);

/**
 * Bumped when the state tables change (2: stage states as a snapshot and each page's changes, `series_state`; 3: spend
 * of answers whose pages never committed, `spend.uncommitted`, and a run's terms, `runs.terms`).
 */
export const STATE_SCHEMA_VERSION = 3;

/**
 * The run-state tables in SQLite (docs/design.md#the-state-store): one database per pipeline, the SQLite sink's own
 * when there is one, so that a page's rows and its state commit in one transaction. They hold runs, series progress and
 * stage state, the page journal, the spend ledger and the lease. Synchronous, as better-sqlite3 is: `sqliteStateStore`
 * puts them behind the asynchronous `StateStore` the runner knows; tests and tools that build a store by hand use them
 * as is.
 */
export function openStateStore(db: Database.Database) {
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
    CREATE TABLE IF NOT EXISTS run_sinks (
      run_id TEXT NOT NULL,
      sink_id TEXT NOT NULL,
      start_seq INTEGER NOT NULL,
      start_bytes INTEGER,
      PRIMARY KEY (run_id, sink_id)
    );
  `);
  const version = db.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get() as string | undefined;
  // Each version so far only added tables or columns: an older file is brought up by the CREATEs above and the columns
  // below, then marked, so that an older webdata-etl refuses it rather than resume without what it cannot read.
  addColumn(db, 'spend', 'uncommitted', 'INTEGER NOT NULL DEFAULT 0');
  addColumn(db, 'runs', 'terms', 'TEXT');
  if (version === undefined) db.prepare(`INSERT INTO webdata_meta (key, value) VALUES ('state_schema', ?)`).run(String(STATE_SCHEMA_VERSION));
  else if (Number(version) < STATE_SCHEMA_VERSION) db.prepare(`UPDATE webdata_meta SET value = ? WHERE key = 'state_schema'`).run(String(STATE_SCHEMA_VERSION));
  db.prepare(`INSERT OR IGNORE INTO webdata_meta (key, value) VALUES ('seq', '0')`).run();

  const statements = {
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
             COALESCE(SUM(duplicates), 0) AS duplicates FROM series WHERE run_id = ?`),
    seriesEnds: db.prepare(`SELECT status, reason, COUNT(*) AS n FROM series WHERE run_id = ? GROUP BY status, reason`),
    failedKinds: db.prepare(`SELECT COALESCE(error_kind, 'error') AS kind, COUNT(*) AS n FROM series WHERE run_id = ? AND status = 'ended' AND reason = 'failed' GROUP BY kind`),
    insertPage: db.prepare(`INSERT INTO pages (seq, run_id, page_key, series_id, number, meta, output, raw, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    journalAfter: db.prepare(`SELECT * FROM pages WHERE seq > ? ORDER BY seq LIMIT 256`),
    prune: db.prepare(`DELETE FROM pages WHERE seq <= ?`),
    dropRunPages: db.prepare(`DELETE FROM pages WHERE run_id = ?`),
    dropRunSeries: db.prepare(`DELETE FROM series WHERE run_id = ?`),
    markAbandoned: db.prepare(`UPDATE runs SET status = 'abandoned', finished_at = ? WHERE run_id = ?`),
    insertSpend: db.prepare(`INSERT INTO spend (run_id, at, series_id, path, attempt, status, credits, uncertain, latency_ms, uncommitted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    spendOf: db.prepare(`SELECT COALESCE(SUM(credits), 0) AS spent, COALESCE(SUM(CASE WHEN uncertain = 1 THEN credits ELSE 0 END), 0) AS uncertain, COALESCE(SUM(CASE WHEN uncommitted = 1 THEN credits ELSE 0 END), 0) AS uncommitted, COUNT(*) AS requests, COALESCE(SUM(CASE WHEN attempt > 1 THEN 1 ELSE 0 END), 0) AS retries FROM spend WHERE run_id = ?`),
    spendByStatus: db.prepare(`SELECT status, COUNT(*) AS n FROM spend WHERE run_id = ? GROUP BY status`),
    spendByPath: db.prepare(`SELECT path, SUM(credits) AS credits FROM spend WHERE run_id = ? AND credits > 0 GROUP BY path`),
    runSinkStart: db.prepare(`INSERT OR IGNORE INTO run_sinks (run_id, sink_id, start_seq, start_bytes) VALUES (?, ?, ?, ?)`),
    runSinks: db.prepare(`SELECT sink_id, start_seq, start_bytes FROM run_sinks WHERE run_id = ?`),
  };

  const checkpoints = sinkCheckpoints(db);
  const dedupe = dedupeTables(db);
  const journal = (entry: JournalWrite) => {
    statements.insertPage.run(entry.seq, entry.runId, entry.pageKey, entry.seriesId, entry.number, entry.meta, entry.output, entry.raw, new Date().toISOString());
  };
  const spend = (row: SpendRow) => {
    statements.insertSpend.run(row.runId, row.at, row.seriesId, row.path, row.attempt, row.status, row.credits, row.uncertain ? 1 : 0, row.latencyMs, row.uncommitted ? 1 : 0);
  };
  const commitPage = db.transaction((commit: PageCommit, within?: (tx: SharedTransaction) => void | Promise<void>) => {
    const seq = statements.nextSeq.get() as number;
    if (seq !== commit.seq) throw new OutputError('locked', 'the page journal moved under this run: another process is writing to the state store. Run again once it has finished', undefined);
    for (const row of commit.spend) spend(row);
    if (commit.dedupe) dedupe.write(commit.dedupe, commit.runId);
    const { state, ...progress } = commit.progress;
    const isSnapshot = state.kind === 'snapshot';
    statements.commitSeries.run({ runId: commit.runId, ...commit.series, ...progress, snapshot: isSnapshot ? state.json : null, isSnapshot: isSnapshot ? 1 : 0 });
    // A snapshot replaces the changes before it; changes go after them.
    if (isSnapshot) statements.dropStateChanges.run(commit.runId, commit.series.seriesId);
    else if (state.json !== null) statements.addStateChanges.run(commit.runId, commit.series.seriesId, seq, state.json);
    if (commit.journal) journal(commit.journal);
    for (const { sinkId, checkpoint } of commit.checkpoints) checkpoints.set(sinkId, checkpoint);
    // A promise here would commit before the sinks' writes: SQLite's transaction is synchronous.
    if (within?.({ kind: 'sqlite' }) instanceof Promise) throw new Error('a sink sharing the SQLite state store wrote asynchronously inside its transaction');
  });
  return {
    db: db as Database.Database,
    path: db.name,
    lease: (pipeline: string) => acquireLease(db, pipeline),
    checkpoints,
    dedupe,

    startRun(run: { runId: string; pipeline: string; startedAt: string; fingerprint: string; plan: unknown; budget: number | null; terms?: unknown }): void {
      // Run-scoped dedupe keys a finished run left behind (it forgets them as it finishes; a failure there leaves them).
      dedupe.forgetFinished();
      statements.insertRun.run(run.runId, run.pipeline, run.startedAt, run.fingerprint, JSON.stringify(run.plan), run.budget, run.terms === undefined ? null : JSON.stringify(run.terms));
    },
    reopenRun(runId: string, budget: number | null, terms?: unknown): void {
      statements.reopenRun.run(budget, terms === undefined ? null : JSON.stringify(terms), runId);
    },
    finishRun(runId: string, status: string, finishedAt: string, summary: unknown, error?: string): void {
      statements.finishRun.run(status, finishedAt, summary === undefined ? null : JSON.stringify(summary), error ?? null, runId);
    },
    latestRun(pipeline: string): RunRecord | undefined {
      const row = statements.latestRun.get(pipeline) as Record<string, unknown> | undefined;
      return row && runRecordFrom(row);
    },
    runs(pipeline: string): RunRecord[] {
      return (statements.runsOf.all(pipeline) as Record<string, unknown>[]).map(runRecordFrom);
    },
    /** Abandons an unfinished run (`--fresh`): its journal and series go; its spend stays (it was paid). */
    abandonRun(runId: string, at: string): void {
      db.transaction(() => {
        statements.dropRunPages.run(runId);
        statements.dropRunSeries.run(runId);
        statements.dropRunStateChanges.run(runId);
        statements.markAbandoned.run(at, runId);
      })();
    },

    currentSeq(): number {
      return statements.currentSeq.get() as number;
    },

    progress(runId: string, seriesId: string): SeriesProgress | undefined {
      const row = statements.progress.get(runId, seriesId) as Record<string, unknown> | undefined;
      return row && seriesProgressFrom(seriesId, row, statements.stateChanges.all(runId, seriesId) as string[]);
    },
    /** A page, its series' progress, spend, dedupe keys, journal entry and file checkpoints, in one transaction. */
    commitPage(commit: PageCommit, within?: (tx: SharedTransaction) => void | Promise<void>): void {
      commitPage(commit, within);
    },
    /** An end that came without a page: the budget, a failure, a 403, or the run's stop. */
    endSeries(runId: string, series: SeriesIdentity, end: SeriesEndRecord): void {
      statements.endSeries.run({ runId, ...series, ...end });
    },
    seriesTotals(runId: string): { pages: number; served: number; written: number; duplicates: number } {
      return statements.seriesTotals.get(runId) as { pages: number; served: number; written: number; duplicates: number };
    },
    seriesEnds(runId: string): { status: string; reason: string | null; n: number }[] {
      return statements.seriesEnds.all(runId) as { status: string; reason: string | null; n: number }[];
    },
    /** Failed series by the class of their last error. */
    failedKinds(runId: string): Record<string, number> {
      return Object.fromEntries((statements.failedKinds.all(runId) as { kind: string; n: number }[]).map((r) => [r.kind, r.n]));
    },

    journal,
    /** Journal entries after `seq`, in order. Read in batches: a sink may write to this connection in between. */
    *journalAfter(seq: number): Generator<JournalEntry> {
      let after = seq;
      for (;;) {
        const rows = statements.journalAfter.all(after) as Record<string, unknown>[];
        if (rows.length === 0) return;
        for (const row of rows) {
          const entry = journalEntryFrom(row);
          after = entry.seq;
          yield entry;
        }
      }
    },
    /** Journal entries every sink holds are no longer needed (unless the journal is kept). */
    prune(heldByAll: number): void {
      statements.prune.run(heldByAll);
    },

    spend,
    spendOf(runId: string) {
      const totals = statements.spendOf.get(runId) as { spent: number; uncertain: number; uncommitted: number; requests: number; retries: number };
      const byStatus = Object.fromEntries((statements.spendByStatus.all(runId) as { status: string; n: number }[]).map((r) => [r.status, r.n]));
      const byEndpoint = Object.fromEntries((statements.spendByPath.all(runId) as { path: string; credits: number }[]).map((r) => [r.path, r.credits]));
      return { ...totals, byStatus, byEndpoint };
    },

    /** Where each sink stood when a run began, so that an abandoned run's output can be taken back. */
    recordSinkStarts(runId: string, starts: readonly { sinkId: string; seq: number; bytes: number | null }[]): void {
      for (const start of starts) statements.runSinkStart.run(runId, start.sinkId, start.seq, start.bytes);
    },
    sinkStarts(runId: string): Map<string, { seq: number; bytes: number | null }> {
      const rows = statements.runSinks.all(runId) as { sink_id: string; start_seq: number; start_bytes: number | null }[];
      return new Map(rows.map((r) => [r.sink_id, { seq: r.start_seq, bytes: r.start_bytes }]));
    },
  };
}

export type SqliteStateTables = ReturnType<typeof openStateStore>;


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
