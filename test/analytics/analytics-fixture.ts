import Database from 'better-sqlite3';
import { createResultsViews, createSpendView } from '../../src/analytics/index.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';

export const R1 = '2026-01-01T00-00-00-000Z-aaaaaa';
export const R2 = '2026-01-02T00-00-00-000Z-bbbbbb';
const DOMAIN: Record<string, string> = { a: 'x.com', b: 'x.com', c: 'y.com', d: 'y.com', e: 'z.com' };

/**
 * A results table small enough to compute every view by hand:
 *   run 1: us a b c, gb a d        run 2: us b a e, gb d a b
 */
export function handMadeDatabase(path: string, runs: readonly string[] = [R1, R2]) {
  const db = new Database(path);
  // The SQLite store does its work before each call returns (better-sqlite3 is synchronous): nothing to wait for.
  const store = sqliteStateStore(db);
  createSpendView(db);
  db.exec(`CREATE TABLE results (run_id TEXT NOT NULL, query TEXT NOT NULL, country TEXT NOT NULL, lang TEXT NOT NULL, page INTEGER NOT NULL,
    position INTEGER NOT NULL, rank INTEGER, title TEXT, url TEXT, domain TEXT, snippet TEXT, dedupe_key TEXT, fetched_at TEXT NOT NULL, raw TEXT NOT NULL)`);
  const insert = db.prepare(`INSERT INTO results VALUES (?, 'q', ?, 'en', 1, ?, ?, ?, ?, ?, NULL, ?, ?, '{}')`);
  const rows: [string, string, string[]][] = [
    [R1, 'us', ['a', 'b', 'c']],
    [R1, 'gb', ['a', 'd']],
    [R2, 'us', ['b', 'a', 'e']],
    [R2, 'gb', ['d', 'a', 'b']],
  ];
  for (const [run, country, items] of rows) {
    items.forEach((item, i) => insert.run(run, country, i + 1, i + 1, `Title ${item}`, `https://${DOMAIN[item]}/${item}`, DOMAIN[item], `https://${DOMAIN[item]}/${item}`, run));
  }
  for (const country of ['us', 'gb']) {
    void store.endSeries(R2, { seriesId: `search|q|${country}|en`, endpoint: '/searchengine/search', query: 'q', country, lang: 'en' }, { status: 'ended', reason: 'short', nextPage: null, error: null, errorKind: null });
  }
  const spend = (series: string, status: string, credits: number, uncertain: boolean) =>
    void store.spend([{ runId: R2, at: R2, seriesId: `search|q|${series}|en`, path: '/searchengine/search', attempt: 1, status, credits, uncertain, latencyMs: 10 }]);
  spend('us', '200', 1, false);
  spend('us', '503', 0, false);
  spend('gb', '200', 1, false);
  spend('gb', 'timeout', 1, true);
  // The runs themselves, as the state store records them (the report reads them).
  for (const run of runs) {
    void store.startRun({ runId: run, pipeline: 'hand', startedAt: run, fingerprint: 'f', plan: {}, budget: null });
    void store.finishRun(run, 'completed', run, { items: { written: 5 }, requests: { total: 5 }, durationMs: 1000 });
  }
  createResultsViews(db, 'results', ['rankings', 'domains', 'overlap', 'changes']);
  db.close();
}

