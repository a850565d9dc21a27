import type Database from 'better-sqlite3';
import type { StateStore } from '../interfaces.ts';
import { sqliteAllowances } from './allowances.ts';
import { sqliteLimits } from './limits.ts';
import { sqliteNotifications } from './notifications.ts';
import { sqliteOccurrences } from './occurrences.ts';
import { sqlitePageCommits } from './page-commits.ts';
import { sqliteRuns } from './runs.ts';
import { migrate } from './schema.ts';
import { dedupeTables } from './seen-keys.ts';
import { sqliteSpend } from './spend.ts';

/** The SQLite state store, and its database for what lives beside it in the same file (SQLite sinks, views). */
export interface SqliteStateStore extends StateStore {
  readonly db: Database.Database;
}

/**
 * The run-state store in a SQLite file (docs/design.md#the-state-store), one module per role: runs and pages
 * (`runs.ts`, a page's commit in `page-commits.ts`), notifications, occurrences, spend, keys' limits and allowances. One database per pipeline, the
 * SQLite sink's own when there is one, so that a page's rows and its state commit in one transaction. Every call does
 * its work before it returns (better-sqlite3 is synchronous), but a page's commit on the commit thread (`commitThread`:
 * a run's store; else on this connection). `clock`: the store's clock, which its claims of scheduled occurrences are
 * measured against and keys' allowances' periods read from (default this machine's; a test gives its virtual one).
 */
export function sqliteStateStore(db: Database.Database, options: { clock?: () => number; commitThread?: boolean } = {}): SqliteStateStore {
  migrate(db);
  const dedupe = dedupeTables(db);
  return {
    db,
    ...sqliteRuns(db, dedupe),
    ...sqlitePageCommits(db, options.commitThread === true),
    ...sqliteNotifications(db),
    ...sqliteOccurrences(db, options.clock ?? Date.now),
    ...sqliteSpend(db),
    ...sqliteLimits(db),
    ...sqliteAllowances(db, options.clock ?? Date.now),
  };
}
