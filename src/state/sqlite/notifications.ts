import type Database from 'better-sqlite3';
import type { NotificationStore } from '../notification-store.ts';
import { failedSeriesFrom, notificationFrom } from '../rows.ts';
import { notificationStatements } from './statements.ts';

/** Notifications in a SQLite state file (docs/notifications.md#at-least-once-and-idempotency), and the failed series they list. */
export function sqliteNotifications(db: Database.Database): NotificationStore {
  const statements = notificationStatements(db);
  return {
    async failedSeries(runId, limit) {
      return (statements.failedSeries.all(runId, limit) as Record<string, unknown>[]).map(failedSeriesFrom);
    },
    /** Attempts add up: a delivery aborted and sent again by a later invocation counts both. */
    async claimNotification(notification) {
      return statements.claimNotification.run(notification).changes === 1;
    },
    async settleNotification(key, outcome) {
      statements.settleNotification.run({ ...key, ...outcome });
    },
    async pendingNotifications(pipeline, limit, staleBefore) {
      return (statements.pendingNotifications.all({ pipeline, limit, staleBefore }) as Record<string, unknown>[]).map(notificationFrom);
    },
    async takeNotification(key, at, staleBefore) {
      return statements.takeNotification.run({ ...key, at, staleBefore }).changes === 1;
    },
  };
}
