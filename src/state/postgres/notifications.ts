import { atDatabase } from '../../postgres/failure.ts';
import { storable } from '../../postgres/storable.ts';
import type { NotificationStore } from '../notification-store.ts';
import { failedSeriesFrom, notificationFrom } from '../rows.ts';
import { notificationStatements } from './statements.ts';
import { type StoreParts, storeQuery } from './store-parts.ts';

/** Notifications in PostgreSQL (docs/notifications.md#at-least-once-and-idempotency), and the failed series they list. */
export function postgresNotifications(parts: StoreParts): NotificationStore {
  const sql = notificationStatements(parts.s);
  return {
    async failedSeries(runId, limit) {
      return (await storeQuery(parts, sql.failedSeries, [runId, limit])).map(failedSeriesFrom);
    },
    async claimNotification(notification) {
      const { runId, invocation, webhook, pipeline, target, event, body, createdAt } = notification;
      // Not retried on a lost answer: the row may have gone in, and a second try would then find it and send nothing.
      // A claim whose answer is lost is left to the next invocation, which finds it pending.
      const { rowCount } = await atDatabase(parts.where, () => parts.pool.query(sql.claimNotification, [runId, invocation, webhook, pipeline, target, event, body, createdAt].map(storable)));
      return rowCount === 1;
    },
    async settleNotification(key, outcome) {
      // Not idempotent (attempts add up), but a repeat only overcounts attempts: safe to try again.
      await storeQuery(parts, sql.settleNotification, [key.runId, key.invocation, key.webhook, outcome.status, outcome.attempts, outcome.error, outcome.at]);
    },
    async pendingNotifications(pipeline, limit, staleBefore) {
      return (await storeQuery(parts, sql.pendingNotifications, [pipeline, limit, staleBefore])).map(notificationFrom);
    },
    async takeNotification(key, at, staleBefore) {
      // Safe to try again: a repeat after a lost answer finds the row `sending` as of `at`, which is this taker's.
      return (await storeQuery(parts, sql.takeNotification, [key.runId, key.invocation, key.webhook, at, staleBefore])).length === 1;
    },
  };
}
