import type { SeriesIdentity } from './series-identity.ts';

/**
 * A notification for one webhook (docs/notifications.md): of a run's end, or of a missed occurrence. Pending until a
 * process takes it for delivery (`sending`), then delivered or given up (or pending again, aborted).
 */
export interface NotificationRecord {
  runId: string;
  /** The run's invocation that ended: a run stopped and resumed ends again, and is told again. */
  invocation: number;
  /** Which webhook (a hash of its whole URL, which may carry a token). */
  webhook: string;
  pipeline: string;
  /** The webhook as shown: origin and path, never its query string. */
  target: string;
  /** The end it tells of: completed, budget, failed, stopped, interrupted. */
  event: string;
  status: 'pending' | 'sending' | 'delivered' | 'failed';
  attempts: number;
  error: string | null;
  /** The exact body to send, kept while pending (a delivery the process did not live to finish is sent again). */
  body: string | null;
  createdAt: string;
  updatedAt: string;
}

/** Which notification: a run's end, for one webhook. */
export type NotificationKey = Pick<NotificationRecord, 'runId' | 'invocation' | 'webhook'>;

/** A series of a run that failed, as a notification lists it: with its last error (redacted) and its class. */
export type FailedSeries = SeriesIdentity & { errorKind: string | null; error: string | null };

/**
 * The state store's notifications (docs/notifications.md#at-least-once-and-idempotency): each recorded once with the body it sends,
 * taken for delivery by one process, settled as its delivery went; and what a run's notification lists of it.
 */
export interface NotificationStore {
  /**
   * The series of a run that failed, in order, at most `limit` of them: what a notification lists (the store keeps
   * each one's last error, redacted).
   */
  failedSeries(runId: string, limit: number): Promise<FailedSeries[]>;
  /**
   * Records a notification as pending, with the body it sends; false when it is recorded already (another worker
   * of the run claimed it: one sends it).
   */
  claimNotification(notification: Omit<NotificationRecord, 'status' | 'attempts' | 'error' | 'updatedAt'>): Promise<boolean>;
  /** How its delivery went: delivered or failed (the body goes), or still pending (aborted), with its attempts. */
  settleNotification(key: NotificationKey, outcome: { status: NotificationRecord['status']; attempts: number; error: string | null; at: string }): Promise<void>;
  /**
   * The pipeline's notifications still owed, oldest first, at most `limit`: pending (a process ended before it took
   * them, or its delivery was aborted), or `sending` since before `staleBefore` (taken by a process that did not live
   * to settle them within the longest a delivery takes).
   */
  pendingNotifications(pipeline: string, limit: number, staleBefore: string): Promise<NotificationRecord[]>;
  /**
   * Takes an owed notification for delivery by this process (docs/notifications.md#at-least-once-and-idempotency): `sending` as of
   * `at`, so that no other process's `pendingNotifications` hands it out while it is sent; false when it is not owed
   * (another took it first, or it was settled).
   */
  takeNotification(key: NotificationKey, at: string, staleBefore: string): Promise<boolean>;
}
