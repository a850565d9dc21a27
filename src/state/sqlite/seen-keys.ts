import type Database from 'better-sqlite3';
import { type DedupeWrites, type SeenKeyStore, UNFINISHED_SQL } from '../interfaces.ts';
import { pendingKeys } from '../pending-keys.ts';

/**
 * Dedupe state for the scopes `query` and `global` and for `persistent` dedupe, in an indexed table of the state store
 * rather than in memory, so that a run's memory does not grow with the keys it has seen (docs/design.md#dedupe-state;
 * what 10 M keys cost: docs/benchmarks.md#figures-the-code-cites).
 */
export function dedupeTables(db: Database.Database) {
  db.exec(`
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
  `);
  const lookup = db.prepare(`SELECT 1 FROM dedupe_keys WHERE scope = ? AND key = ?`).pluck();
  const insertKey = db.prepare(`INSERT OR IGNORE INTO dedupe_keys (scope, key, run_id) VALUES (?, ?, ?)`);
  const insertSighting = db.prepare(
    `INSERT INTO sightings (run_id, dedupe_key, query, country, lang, page, position, rank, fetched_at, first) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const forgetRun = db.prepare(`DELETE FROM dedupe_keys WHERE run_id = ?`);
  const forgetFinished = db.prepare(`DELETE FROM dedupe_keys WHERE run_id IN (SELECT run_id FROM runs WHERE status NOT IN (${UNFINISHED_SQL}))`);
  return {
    /** Run-scoped keys of runs that finished (or were abandoned): nobody resumes them. */
    forgetFinished: () => void forgetFinished.run(),
    has: (scope: string, key: string) => lookup.get(scope, key) !== undefined,
    /** What pages added: call inside the page's transaction. */
    write(writes: DedupeWrites, runId: string): void {
      for (const k of writes.keys) insertKey.run(k.scope, k.key, k.runId);
      for (const s of writes.sightings) {
        insertSighting.run(runId, s.key, s.query, s.country, s.lang, s.page, s.position, s.rank, s.fetchedAt, s.first ? 1 : 0);
      }
    },
    /** A finished run's own keys are no longer needed (persistent ones stay). */
    forgetRun: (runId: string) => void forgetRun.run(runId),
  };
}

/** A run's view of the dedupe tables: what its pages add waits for their commit (see `pendingKeys`). */
export function seenKeys(tables: ReturnType<typeof dedupeTables>, runId: string): SeenKeyStore {
  return pendingKeys(runId, {
    has: async (scope, keys) => keys.filter((key) => tables.has(scope, key)),
    forgetRun: async () => tables.forgetRun(runId),
  });
}
