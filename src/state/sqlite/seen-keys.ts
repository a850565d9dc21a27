import type Database from 'better-sqlite3';
import type { SeenKeys, SeenKeyStore, Sighting } from '../interfaces.ts';

/**
 * Dedupe state for the scopes `query` and `global` and for `persistent` dedupe, in an indexed table of the state
 * store rather than in memory (DESIGN §4: 10 M keys take about 125 MB on disk, where a JS Set of URL strings would
 * take ~1.9 GB of heap). What a page adds is held until the page commits, and written in its transaction: a page
 * that never committed leaves no key behind, so re-fetching it after a crash does not see its own items as seen.
 */
export function seenKeys(db: Database.Database, runId: string): SeenKeyStore {
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
  const pendingKeys = new Map<string, string | null>();
  const pendingSightings: Sighting[] = [];
  const id = (scope: string, key: string) => `${scope}\u0000${key}`;

  return {
    /** `runScoped`: keys of this run only (forgotten when it finishes); otherwise kept across runs. */
    view(runScoped: boolean): SeenKeys {
      return {
        has: (scope, key) => pendingKeys.has(id(scope, key)) || lookup.get(scope, key) !== undefined,
        add: (scope, key) => {
          pendingKeys.set(id(scope, key), runScoped ? runId : null);
        },
        sighting: (sighting) => {
          pendingSightings.push(sighting);
        },
      };
    },
    /** Writes what the current page added: call inside the page's transaction. */
    flush(): void {
      for (const [composite, owner] of pendingKeys) {
        const cut = composite.indexOf('\u0000');
        insertKey.run(composite.slice(0, cut), composite.slice(cut + 1), owner);
      }
      pendingKeys.clear();
      for (const s of pendingSightings.splice(0)) {
        insertSighting.run(runId, s.key, s.query, s.country, s.lang, s.page, s.position, s.rank, s.fetchedAt, s.first ? 1 : 0);
      }
    },
    /** A finished run's own keys are no longer needed (persistent ones stay). */
    forgetRun(): void {
      forgetRun.run(runId);
    },
  };
}

