import type Database from 'better-sqlite3';

/** Tables the state store owns; a results table may not take these names. */
export const RESERVED_TABLES: ReadonlySet<string> = new Set(['webdata_meta', 'runs', 'series', 'pages', 'spend', 'sink_checkpoints', 'dedupe_keys', 'sightings', 'lease']);

/** Bumped when the state tables change. */
export const STATE_SCHEMA_VERSION = 1;

export interface RunRecord {
  runId: string;
  pipeline: string;
  status: string;
  startedAt: string;
  finishedAt: string | null;
  fingerprint: string;
  summary: unknown;
  error: string | null;
}

export interface SeriesRecord {
  seriesId: string;
  endpoint: string;
  query: string;
  country: string;
  lang: string;
  /** `ended` by its own rule, a failure, the budget or a 403; `stopped` with the run (resumable). */
  status: 'ended' | 'stopped';
  reason: string;
  pages: number;
  error: string | null;
}

/**
 * The run-state store (DESIGN §4): one SQLite database per pipeline, the SQLite sink's own when there is one.
 * It records runs and how each series ended; `runs` and the analytics views read it. The interface is the seam
 * for another store (PostgreSQL) later.
 */
export function openStateStore(db: Database.Database) {
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(`
    CREATE TABLE IF NOT EXISTS webdata_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS runs (
      run_id TEXT PRIMARY KEY,
      pipeline TEXT NOT NULL,
      status TEXT NOT NULL,
      started_at TEXT NOT NULL,
      finished_at TEXT,
      fingerprint TEXT NOT NULL,
      summary TEXT,
      error TEXT
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
      reason TEXT NOT NULL,
      pages INTEGER NOT NULL,
      error TEXT,
      PRIMARY KEY (run_id, series_id)
    );
  `);
  const version = db.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get() as string | undefined;
  if (version === undefined) db.prepare(`INSERT INTO webdata_meta (key, value) VALUES ('state_schema', ?)`).run(String(STATE_SCHEMA_VERSION));
  else if (Number(version) > STATE_SCHEMA_VERSION) {
    throw new Error(`${db.name} holds state written by a newer webdata-etl (schema ${version}); upgrade webdata-etl`);
  }

  const insertRun = db.prepare(`INSERT INTO runs (run_id, pipeline, status, started_at, fingerprint) VALUES (?, ?, 'running', ?, ?)`);
  const updateRun = db.prepare(`UPDATE runs SET status = ?, finished_at = ?, summary = ?, error = ? WHERE run_id = ?`);
  const upsertSeries = db.prepare(`
    INSERT INTO series (run_id, series_id, endpoint, query, country, lang, status, reason, pages, error)
    VALUES (@runId, @seriesId, @endpoint, @query, @country, @lang, @status, @reason, @pages, @error)
    ON CONFLICT (run_id, series_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, pages = excluded.pages, error = excluded.error`);
  const selectRuns = db.prepare(`SELECT run_id, pipeline, status, started_at, finished_at, fingerprint, summary, error FROM runs WHERE pipeline = ? ORDER BY started_at`);

  return {
    db,
    startRun(run: { runId: string; pipeline: string; startedAt: string; fingerprint: string }): void {
      insertRun.run(run.runId, run.pipeline, run.startedAt, run.fingerprint);
    },
    finishRun(runId: string, status: string, finishedAt: string, summary: unknown, error?: string): void {
      updateRun.run(status, finishedAt, summary === undefined ? null : JSON.stringify(summary), error ?? null, runId);
    },
    recordSeries(runId: string, record: SeriesRecord): void {
      upsertSeries.run({ runId, ...record });
    },
    runs(pipeline: string): RunRecord[] {
      return (selectRuns.all(pipeline) as Record<string, string | null>[]).map((row) => ({
        runId: row.run_id as string,
        pipeline: row.pipeline as string,
        status: row.status as string,
        startedAt: row.started_at as string,
        finishedAt: row.finished_at ?? null,
        fingerprint: row.fingerprint as string,
        summary: row.summary ? JSON.parse(row.summary) : null,
        error: row.error ?? null,
      }));
    },
  };
}

export type StateStore = ReturnType<typeof openStateStore>;
