import { UNFINISHED_SQL } from '../interfaces.ts';
import { CLAIM_AHEAD_TOLERANCE_MS } from '../occurrence-store.ts';

/** Journal entries read at a time by `journalAfter`. */
const JOURNAL_BATCH = 256;

/*
 * Every statement the PostgreSQL state store sends but a page's own (page-statement.ts) and the schema's migrations
 * (schema.ts), by name and by role, as SQL of the quoted schema `s` (the pg-boss `plans.ts` way): a reader sees what the
 * store asks of the database in one place. Parameters are always bound ($n); identifiers are quoted where they are
 * made (sql-identifier.ts).
 */

/** Runs and pages: the pipeline's journal, runs, series, sink checkpoints and starts, dedupe keys, the lease. */
export function runStatements(s: string) {
  const END_SERIES = `INSERT INTO ${s}.series (run_id, series_id, endpoint, query, country, lang, status, reason, next_page, error, error_kind)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
      ON CONFLICT (run_id, series_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, error = excluded.error, error_kind = excluded.error_kind,
        next_page = COALESCE(excluded.next_page, series.next_page)`;
  return {
    /** The pipeline's row: its journal sequence. */
    addPipeline: `INSERT INTO ${s}.pipelines (pipeline) VALUES ($1) ON CONFLICT DO NOTHING`,
    /** Where the pipeline's journal stands. */
    currentSeq: `SELECT seq FROM ${s}.pipelines WHERE pipeline = $1`,
    /** A sink's checkpoint (files and sinks of one's own, outside a page's statement). */
    setCheckpoint: `INSERT INTO ${s}.sink_checkpoints (pipeline, sink_id, seq, bytes, updated_at) VALUES ($1, $2, $3, $4, now())
      ON CONFLICT (pipeline, sink_id) DO UPDATE SET seq = excluded.seq, bytes = excluded.bytes, updated_at = excluded.updated_at`,
    /** Where a series stands: whether a worker's commit whose answer was lost went in. */
    seriesPosition: `SELECT next_page, status FROM ${s}.series WHERE run_id = $1 AND series_id = $2`,
    /** A sink's checkpoint. */
    checkpoint: `SELECT seq, bytes FROM ${s}.sink_checkpoints WHERE pipeline = $1 AND sink_id = $2`,
    /** Which of a page's dedupe keys a scope has seen. */
    seenKeys: `SELECT key FROM ${s}.dedupe_keys WHERE pipeline = $1 AND scope = $2 AND key = ANY($3::text[])`,
    /** A finished run's run-scoped dedupe keys. */
    forgetRunKeys: `DELETE FROM ${s}.dedupe_keys WHERE pipeline = $1 AND run_id = $2`,
    /** Run-scoped dedupe keys of the pipeline's finished runs (two workers finishing at once each leave them to the other). */
    dropFinishedRunKeys: `DELETE FROM ${s}.dedupe_keys WHERE pipeline = $1 AND run_id IN (SELECT run_id FROM ${s}.runs WHERE pipeline = $1 AND status NOT IN (${UNFINISHED_SQL}))`,
    /** A new run. */
    insertRun: `INSERT INTO ${s}.runs (run_id, pipeline, status, started_at, fingerprint, plan, budget, terms) VALUES ($1, $2, 'running', $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
    /** A resumed run: running again, its budget, its terms as this invocation runs with them. */
    reopenRun: `UPDATE ${s}.runs SET status = 'running', finished_at = NULL, error = NULL, budget = $1, terms = coalesce($3, terms), invocations = invocations + 1 WHERE run_id = $2`,
    /** How an invocation left its run. */
    finishRun: `UPDATE ${s}.runs SET status = $1, finished_at = $2, summary = $3, error = $4 WHERE run_id = $5`,
    /** The run recorded last (a sequence, never `started_at`: that is a client's clock). */
    latestRun: `SELECT * FROM ${s}.runs WHERE pipeline = $1 AND status <> 'abandoned' ORDER BY created DESC LIMIT 1`,
    /** A pipeline's runs, in the order they were recorded. */
    runs: `SELECT * FROM ${s}.runs WHERE pipeline = $1 ORDER BY created`,
    /** `fresh`: an abandoned run's journal, series and stage state go; its spend stays (it was paid). */
    abandonPages: `DELETE FROM ${s}.pages WHERE pipeline = $1 AND run_id = $2`,
    abandonSeries: `DELETE FROM ${s}.series WHERE run_id = $1`,
    abandonStateChanges: `DELETE FROM ${s}.series_state WHERE run_id = $1`,
    markAbandoned: `UPDATE ${s}.runs SET status = 'abandoned', finished_at = $1 WHERE run_id = $2`,
    /** A series' row and the stage state changes after its snapshot, in one statement (a worker may be committing it). */
    progress: `SELECT series.*, ARRAY(SELECT changes FROM ${s}.series_state c WHERE c.run_id = series.run_id AND c.series_id = series.series_id ORDER BY seq) AS state_changes
      FROM ${s}.series WHERE run_id = $1 AND series_id = $2`,
    /** The same of a slice of series (`$2`: their ids), in one statement. */
    progresses: `SELECT series.*, ARRAY(SELECT changes FROM ${s}.series_state c WHERE c.run_id = series.run_id AND c.series_id = series.series_id ORDER BY seq) AS state_changes
      FROM ${s}.series WHERE run_id = $1 AND series_id = ANY($2::text[])`,
    /** What a page's statement (page-statement.ts) answers: its journal number, none if the page did not take its place. */
    pageTaken: 'SELECT seq FROM w_seq',
    /** The same, and how many of the page's dedupe keys it claimed for the run (the others' rows were not written). */
    pageTakenClaimed: 'SELECT seq, (SELECT count(*) FROM w_claimed)::int AS claimed FROM w_seq',
    /**
     * Rows a worker's page ($4, its number) dropped for keys another worker claimed first: counted as duplicates, not
     * written; once for the page, so that it is safe to send again when its answer was lost.
     */
    uncountRefused: `UPDATE ${s}.series SET items_written = items_written - $3, duplicates = duplicates + $3, refused_pages = array_append(refused_pages, $4::int)
      WHERE run_id = $1 AND series_id = $2 AND $4::int <> ALL (COALESCE(refused_pages, '{}'))`,
    /** An end that came without a page (null next page: where the series' last page left it). */
    endSeries: END_SERIES,
    /** The same for a worker: a series another worker ended stays as that worker left it. */
    endWorkerSeries: `${END_SERIES} WHERE series.status <> 'ended'`,
    /** A run's summary: its series' totals, how they ended, why they failed. */
    seriesTotals: `SELECT COALESCE(SUM(pages), 0)::float8 AS pages, COALESCE(SUM(items_served), 0)::float8 AS served, COALESCE(SUM(items_written), 0)::float8 AS written,
      COALESCE(SUM(duplicates), 0)::float8 AS duplicates, COALESCE(SUM(GREATEST(items_served - items_written - duplicates, 0)), 0)::float8 AS dropped
      FROM ${s}.series WHERE run_id = $1`,
    seriesEnds: `SELECT status, reason, COUNT(*)::int AS n FROM ${s}.series WHERE run_id = $1 GROUP BY status, reason`,
    /** Where each of a slice of the plan's series stands (`$2`: their ids), when the run closes. */
    seriesStatuses: `SELECT series_id AS "seriesId", status, reason FROM ${s}.series WHERE run_id = $1 AND series_id = ANY($2::text[])`,
    reachedStatuses: `SELECT series_id AS "seriesId", status, reason FROM ${s}.series WHERE run_id = $1 AND series_id > $2 ORDER BY series_id LIMIT $3`,
    failedKinds: `SELECT COALESCE(error_kind, 'error') AS kind, COUNT(*)::int AS n FROM ${s}.series WHERE run_id = $1 AND status = 'ended' AND reason = 'failed' GROUP BY kind`,
    /** The journal after a sink's checkpoint, a batch at a time. */
    journalAfter: `SELECT * FROM ${s}.pages WHERE pipeline = $1 AND seq > $2 ORDER BY seq LIMIT ${JOURNAL_BATCH}`,
    /** Journal entries every sink holds. */
    prune: `DELETE FROM ${s}.pages WHERE pipeline = $1 AND seq <= $2`,
    /** Where a sink stood when a run began (so that an abandoned run's output can be taken back). */
    recordSinkStart: `INSERT INTO ${s}.run_sinks (run_id, sink_id, start_seq, start_bytes) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
    /** Where each sink stood when the run began. */
    sinkStarts: `SELECT sink_id, start_seq, start_bytes FROM ${s}.run_sinks WHERE run_id = $1`,
    /** Who holds the pipeline's lease, for another run's message. */
    leaseHolder: `SELECT pid, host, acquired_at FROM ${s}.leases WHERE pipeline = $1`,
    /** The lease's row (the lock is an advisory lock on the holder's own connection), taken and given back. */
    takeLease: `INSERT INTO ${s}.leases (pipeline, holder, pid, host, acquired_at) VALUES ($1, $2, $3, $4, now())
      ON CONFLICT (pipeline) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, host = excluded.host, acquired_at = excluded.acquired_at`,
    giveLease: `DELETE FROM ${s}.leases WHERE pipeline = $1 AND holder = $2`,
  } as const;
}

/** Spend: a run's totals (rows are written by `insertSpend`, page-statement.ts). */
export function spendStatements(s: string) {
  return {
    /** A run's spend: what counted against its budget, the uncertain part, the part whose pages never committed. */
    spendTotals: `SELECT COALESCE(SUM(credits), 0)::float8 AS spent, COALESCE(SUM(CASE WHEN uncertain THEN credits ELSE 0 END), 0)::float8 AS uncertain,
      COALESCE(SUM(CASE WHEN uncommitted THEN credits ELSE 0 END), 0)::float8 AS uncommitted,
      COUNT(*)::int AS requests, COALESCE(SUM(CASE WHEN attempt > 1 THEN 1 ELSE 0 END), 0)::int AS retries FROM ${s}.spend WHERE run_id = $1`,
    /** Requests by status, and credits by endpoint. */
    spendByStatus: `SELECT status, COUNT(*)::int AS n FROM ${s}.spend WHERE run_id = $1 GROUP BY status`,
    spendByPath: `SELECT path, SUM(credits)::float8 AS credits FROM ${s}.spend WHERE run_id = $1 AND credits > 0 GROUP BY path`,
  } as const;
}

/** Keys' remembered limits, and the schema's secret their fingerprints are taken under (made once: the first insert stands). */
export function limitStatements(s: string) {
  return {
    makeSecret: `INSERT INTO ${s}.meta (key, value) VALUES ('key_secret', $1) ON CONFLICT (key) DO NOTHING`,
    secret: `SELECT value FROM ${s}.meta WHERE key = 'key_secret'`,
    limitsOf: `SELECT fingerprint, api, rate, above, learned_at FROM ${s}.key_limits WHERE api = $1 AND fingerprint = ANY($2::text[])`,
    remember: `INSERT INTO ${s}.key_limits (fingerprint, api, rate, above, learned_at) SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[], $5::timestamptz[])
      ON CONFLICT (fingerprint, api) DO UPDATE SET rate = excluded.rate, above = excluded.above, learned_at = excluded.learned_at`,
  } as const;
}

/**
 * Keys' allowances and holds (allowances.ts), the schema's whatever the pipeline. Times are the server's (now()): the
 * period a hold is for is the store's clock's.
 */
export function allowanceStatements(s: string) {
  const columns = `credits::float8 AS credits, per, timezone, pipeline, label, declared_at`;
  return {
    /** A first declaration for the key: its row, or none when one was there (then read under its lock). */
    recordNew: `INSERT INTO ${s}.key_allowances (fingerprint, credits, per, timezone, pipeline, label) VALUES ($1, $2, $3, $4, $5, $6)
      ON CONFLICT (fingerprint) DO NOTHING RETURNING ${columns}`,
    allowanceOf: `SELECT ${columns} FROM ${s}.key_allowances WHERE fingerprint = $1`,
    /** The key's row, locked until the transaction ends: one declaration or hold of the key at a time. */
    lockAllowance: `SELECT ${columns}, now() AS store_time FROM ${s}.key_allowances WHERE fingerprint = $1 FOR UPDATE`,
    recordAllowance: `UPDATE ${s}.key_allowances SET credits = $2, per = $3, timezone = $4, pipeline = $5, label = $6, declared_at = now() WHERE fingerprint = $1 RETURNING ${columns}`,
    /** Holds their holders stopped renewing go back (the asking holder's own stay: it is alive, asking). */
    dropExpired: `DELETE FROM ${s}.key_holds WHERE fingerprint = $1 AND expires_at < now() AND holder <> $2`,
    /**
     * What the key's period has taken, in one statement (one snapshot: a row moving from a hold to the ledger is counted
     * once): spent (the ledger), held (every holder's), and `mine`, holder $3's.
     */
    usage: `SELECT (SELECT COALESCE(SUM(credits), 0) FROM ${s}.spend WHERE key_fingerprint = $1 AND period = $2)::float8 AS spent,
      (SELECT COALESCE(SUM(credits), 0) FROM ${s}.key_holds WHERE fingerprint = $1 AND period = $2)::float8 AS held,
      (SELECT COALESCE(SUM(credits), 0) FROM ${s}.key_holds WHERE fingerprint = $1 AND period = $2 AND holder = $3)::float8 AS mine`,
    /** What the key's period has taken, holds expired left out, and what one run spent of it since an instant (a share's). */
    usageOfRun: `SELECT (SELECT COALESCE(SUM(credits), 0) FROM ${s}.spend WHERE key_fingerprint = $1 AND period = $2)::float8 AS spent,
      (SELECT COALESCE(SUM(credits), 0) FROM ${s}.key_holds WHERE fingerprint = $1 AND period = $2 AND expires_at >= now())::float8 AS held,
      (SELECT COALESCE(SUM(credits), 0) FROM ${s}.spend WHERE key_fingerprint = $1 AND period = $2 AND run_id = $3 AND at >= $4::timestamptz)::float8 AS "runSpent"`,
    hold: `INSERT INTO ${s}.key_holds (fingerprint, period, holder, pipeline, run_id, credits, expires_at) VALUES ($1, $2, $3, $4, $5, $6, now() + $7 * interval '1 millisecond')
      ON CONFLICT (fingerprint, period, holder) DO UPDATE SET credits = key_holds.credits + excluded.credits, expires_at = excluded.expires_at`,
    giveBack: `UPDATE ${s}.key_holds SET credits = GREATEST(credits - $4, 0) WHERE fingerprint = $1 AND period = $2 AND holder = $3`,
    renew: `UPDATE ${s}.key_holds SET expires_at = now() + $2 * interval '1 millisecond' WHERE holder = $1`,
    release: `DELETE FROM ${s}.key_holds WHERE holder = $1`,
  } as const;
}

/** Notifications, and the failed series a run's notification lists. */
export function notificationStatements(s: string) {
  return {
    /** A run's failed series, for its notification. */
    failedSeries: `SELECT series_id, endpoint, query, country, lang, error_kind, error FROM ${s}.series
      WHERE run_id = $1 AND status = 'ended' AND reason = 'failed' ORDER BY query COLLATE "C", country COLLATE "C", lang COLLATE "C", series_id COLLATE "C" LIMIT $2`,
    /** A notification recorded pending, once: the worker whose row went in sends it. */
    claimNotification: `INSERT INTO ${s}.notifications (run_id, invocation, webhook, pipeline, target, event, status, attempts, body, created_at, updated_at)
      VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $8, $8) ON CONFLICT DO NOTHING`,
    /** How a delivery went; the body goes once it is no longer pending. */
    settleNotification: `UPDATE ${s}.notifications SET status = $4, attempts = attempts + $5, error = $6, updated_at = $7,
        body = CASE WHEN $4 = 'pending' THEN body ELSE NULL END
      WHERE run_id = $1 AND invocation = $2 AND webhook = $3`,
    /** The pipeline's notifications still owed: pending, or taken by a process that did not settle them by $3. */
    pendingNotifications: `SELECT * FROM ${s}.notifications WHERE pipeline = $1 AND (status = 'pending' OR (status = 'sending' AND updated_at < $3))
      ORDER BY created_at LIMIT $2`,
    /**
     * An owed notification taken for delivery as of $4 (or one a dead process took before $5): one process takes it.
     * Taken again as of the same $4 (a repeat after a lost answer), it is the same taker's.
     */
    takeNotification: `UPDATE ${s}.notifications SET status = 'sending', updated_at = $4
      WHERE run_id = $1 AND invocation = $2 AND webhook = $3 AND (status = 'pending' OR (status = 'sending' AND (updated_at < $5 OR updated_at = $4))) RETURNING 1`,
  } as const;
}

/** A schedule's occurrences, and the server's clock. */
export function occurrenceStatements(s: string) {
  return {
    /**
     * A scheduled occurrence, claimed once and never ahead of this server's clock (docs/schedules.md#clocks): the row
     * goes in only when it is due by now() and the tolerance. The answer: whether it was (`in_time`), whether this
     * insert took (`won`), and now() (`store_time`).
     */
    claimOccurrence: `WITH clock AS (SELECT now() AS store_time, $2::timestamptz <= now() + interval '${CLAIM_AHEAD_TOLERANCE_MS} milliseconds' AS in_time),
      claimed AS (INSERT INTO ${s}.occurrences (pipeline, due_at, outcome, worker, note) SELECT $1, $2::timestamptz, $3, $4, $5 FROM clock WHERE in_time
        ON CONFLICT DO NOTHING RETURNING due_at)
      SELECT store_time, in_time, EXISTS (SELECT 1 FROM claimed) AS won FROM clock`,
    /** The server's clock, as claims are measured against it. */
    storeClock: 'SELECT now() AS store_time',
    /** What became of it: the run and the note kept when not given ($4, $6 say whether they are). */
    settleOccurrence: `UPDATE ${s}.occurrences SET outcome = $3, run_id = CASE WHEN $4 THEN $5 ELSE run_id END, note = CASE WHEN $6 THEN $7 ELSE note END
      WHERE pipeline = $1 AND due_at = $2`,
    /** The pipeline's occurrences, the latest first ($2: how many; null, all), due at or before $3 (null: all). */
    occurrences: `SELECT * FROM ${s}.occurrences WHERE pipeline = $1 AND ($3::timestamptz IS NULL OR due_at <= $3::timestamptz) ORDER BY due_at DESC LIMIT $2`,
    /** The occurrence that started or resumed a run. */
    occurrenceOfRun: `SELECT * FROM ${s}.occurrences WHERE pipeline = $1 AND run_id = $2 ORDER BY due_at DESC`,
    /** The occurrence due at a time. */
    occurrenceAt: `SELECT * FROM ${s}.occurrences WHERE pipeline = $1 AND due_at = $2`,
    /** The oldest occurrences that took no run go, but the latest $2 of them. */
    pruneOccurrences: `DELETE FROM ${s}.occurrences WHERE pipeline = $1 AND run_id IS NULL AND outcome IN ('skipped', 'missed', 'failed')
      AND due_at <= (SELECT due_at FROM ${s}.occurrences WHERE pipeline = $1 AND run_id IS NULL AND outcome IN ('skipped', 'missed', 'failed')
                     ORDER BY due_at DESC LIMIT 1 OFFSET $2)`,
  } as const;
}

/** What `migrate` asks of the database around the migrations: one at a time, the schema, its version. */
export function schemaStatements(s: string) {
  return {
    /** One migrating process at a time, whatever the number starting together ($1: the schema's lock key). */
    lock: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))',
    /**
     * Whether the schema exists: looked up first, since PostgreSQL checks the database's CREATE privilege before IF
     * NOT EXISTS, and a role given a schema an administrator made needs no more.
     */
    schemaExists: 'SELECT 1 FROM pg_namespace WHERE nspname = $1',
    createSchema: `CREATE SCHEMA IF NOT EXISTS ${s}`,
    versionTable: `CREATE TABLE IF NOT EXISTS ${s}.schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    version: `SELECT max(version) AS version FROM ${s}.schema_version`,
    applied: `INSERT INTO ${s}.schema_version (version) VALUES ($1)`,
  } as const;
}
