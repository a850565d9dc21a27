import type Database from 'better-sqlite3';

/*
 * The statements of keys' roles in a SQLite state file, apart from statements.ts by role as it grew: what keys learned
 * of the server's limits, and keys' allowances with the credits held of them. Names in them are ours, never a user's.
 */

/**
 * What keys learned of the server's limits (docs/scheduler.md#a-remembered-start), by the key's fingerprint under the
 * file's secret (`webdata_meta`, 'key_secret') and the API's origin and path: never a key.
 */
export const KEY_LIMITS_TABLE = `
  CREATE TABLE IF NOT EXISTS key_limits (
    fingerprint TEXT NOT NULL,
    api TEXT NOT NULL,
    rate REAL NOT NULL,
    above REAL,
    learned_at TEXT NOT NULL,
    PRIMARY KEY (fingerprint, api)
  );
`;

/**
 * Keys' allowances (docs/credits.md#allowances): the credits a key may spend a day or a month, by its fingerprint,
 * as the pipeline that declared it last recorded it (and the label it gives the key), binding every pipeline of the
 * file; and the credits each process holds of one for the period it is in, until it spends them (the ledger takes them
 * over with the spend row) or gives them back. `expires_at`: the store's clock (ms since the epoch) after which a hold
 * whose holder stopped renewing it is no one's.
 */
export const KEY_ALLOWANCES_TABLES = `
  CREATE TABLE IF NOT EXISTS key_allowances (
    fingerprint TEXT PRIMARY KEY,
    credits INTEGER NOT NULL,
    per TEXT NOT NULL,
    timezone TEXT NOT NULL,
    pipeline TEXT NOT NULL,
    label TEXT NOT NULL,
    declared_at TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS key_holds (
    fingerprint TEXT NOT NULL,
    period TEXT NOT NULL,
    holder TEXT NOT NULL,
    pipeline TEXT NOT NULL,
    run_id TEXT NOT NULL,
    credits REAL NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (fingerprint, period, holder)
  );
`;

/** Keys' remembered limits, and the file's secret their fingerprints are taken under (made once: the first insert stands). */
export function limitStatements(db: Database.Database) {
  const prepared = {
    makeSecret: db.prepare(`INSERT OR IGNORE INTO webdata_meta (key, value) VALUES ('key_secret', ?)`),
    secret: db.prepare(`SELECT value FROM webdata_meta WHERE key = 'key_secret'`).pluck(),
    limitOf: db.prepare(`SELECT fingerprint, api, rate, above, learned_at AS learnedAt FROM key_limits WHERE api = ? AND fingerprint = ?`),
    remember: db.prepare(`INSERT INTO key_limits (fingerprint, api, rate, above, learned_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (fingerprint, api) DO UPDATE SET rate = excluded.rate, above = excluded.above, learned_at = excluded.learned_at`),
  };
  return prepared as Record<keyof typeof prepared, Database.Statement>;
}

/**
 * Keys' allowances and holds (allowances.ts). `now` and `expiresAt` are the store's clock in milliseconds since the
 * epoch; a period is its key (`2026-11-27`, `2026-11`).
 */
export function allowanceStatements(db: Database.Database) {
  const prepared = {
    allowanceOf: db.prepare(`SELECT credits, per, timezone, pipeline, label, declared_at AS declaredAt FROM key_allowances WHERE fingerprint = ?`),
    recordAllowance: db.prepare(`INSERT INTO key_allowances (fingerprint, credits, per, timezone, pipeline, label, declared_at) VALUES (@fingerprint, @credits, @per, @timezone, @pipeline, @label, @declaredAt)
      ON CONFLICT (fingerprint) DO UPDATE SET credits = excluded.credits, per = excluded.per, timezone = excluded.timezone, pipeline = excluded.pipeline,
        label = excluded.label, declared_at = excluded.declared_at`),
    /** Holds their holders stopped renewing go back (the asking holder's own stay: it is alive, asking). */
    dropExpired: db.prepare(`DELETE FROM key_holds WHERE fingerprint = @fingerprint AND expires_at < @now AND holder <> @holder`),
    /** What the key's period has taken: spent (the ledger, every pipeline's) and held (every holder's; `mine`, the asker's). */
    usage: db.prepare(`SELECT
        (SELECT COALESCE(SUM(credits), 0) FROM spend WHERE key_fingerprint = @fingerprint AND period = @period) AS spent,
        (SELECT COALESCE(SUM(credits), 0) FROM key_holds WHERE fingerprint = @fingerprint AND period = @period) AS held,
        (SELECT COALESCE(SUM(credits), 0) FROM key_holds WHERE fingerprint = @fingerprint AND period = @period AND holder = @holder) AS mine`),
    /** What the key's period has taken, holds expired left out, and what one run spent of it since an instant (a share's). */
    usageOfRun: db.prepare(`SELECT
        (SELECT COALESCE(SUM(credits), 0) FROM spend WHERE key_fingerprint = @fingerprint AND period = @period) AS spent,
        (SELECT COALESCE(SUM(credits), 0) FROM key_holds WHERE fingerprint = @fingerprint AND period = @period AND expires_at >= @now) AS held,
        (SELECT COALESCE(SUM(credits), 0) FROM spend WHERE key_fingerprint = @fingerprint AND period = @period AND run_id = @runId AND at >= @since) AS runSpent`),
    hold: db.prepare(`INSERT INTO key_holds (fingerprint, period, holder, pipeline, run_id, credits, expires_at) VALUES (@fingerprint, @period, @holder, @pipeline, @runId, @granted, @expiresAt)
      ON CONFLICT (fingerprint, period, holder) DO UPDATE SET credits = credits + excluded.credits, expires_at = excluded.expires_at`),
    /** Credits out of a hold: spent (their spend row goes into the ledger in the same transaction) or given back. */
    takeOutOfHold: db.prepare(`UPDATE key_holds SET credits = MAX(credits - @credits, 0) WHERE fingerprint = @fingerprint AND period = @period AND holder = @holder`),
    renew: db.prepare(`UPDATE key_holds SET expires_at = @expiresAt WHERE holder = @holder`),
    release: db.prepare(`DELETE FROM key_holds WHERE holder = ?`),
  };
  return prepared as Record<keyof typeof prepared, Database.Statement>;
}
