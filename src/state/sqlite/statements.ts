import type Database from 'better-sqlite3';

/**
 * The SQLite state store's statements by name, prepared once on its connection: a reader sees what the store asks
 * of the file in one place (dedupe's and checkpoints' own are in seen-keys.ts and checkpoints.ts).
 */
export function stateStatements(db: Database.Database) {
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
  // Named by their keys, typed as statements (a declaration file cannot name better-sqlite3's inferred class).
  return prepared as Record<keyof typeof prepared, Database.Statement>;
}
