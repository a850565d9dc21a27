import { deliver, type DeliveryOutcome } from '../notify/deliver.ts';
import type { ReadyWebhooks } from '../notify/ready-webhooks.ts';
import { MAX_DELIVERY_MS, type Webhook, webhookKey, webhookLabel } from '../notify/webhook-config.ts';
import type { NotificationKey, NotificationRecord, NotificationStore } from '../state/notification-store.ts';
import type { RunEvent } from './run-types.ts';

/**
 * How a recorded notification is delivered (docs/notifications.md#at-least-once-and-idempotency), a run's end's or a
 * missed occurrence's alike: taken for delivery by this process (`sending`, so that no other hands it out meanwhile),
 * sent with bounded retries, and settled as it went. One taken by a process that died before settling it is owed again
 * once it is older than the longest a delivery takes.
 */
export interface NotificationSender {
  store: NotificationStore;
  ready: ReadyWebhooks;
  /** Redacts the secrets (the API key or token, the webhook secret) from what is sent, stored or said. */
  redact: (text: string) => string;
  emit: (event: Extract<RunEvent, { type: 'notification' | 'warning' }>) => void;
  /** Deliveries stop at once and stay pending for the next taker. */
  abortSignal?: AbortSignal | undefined;
}

/** A delivery is bounded by MAX_DELIVERY_MS: one `sending` for longer (and a minute) was left by a process that died. */
const STALE_AFTER_MS = MAX_DELIVERY_MS + 60_000;

const staleBefore = (at: number) => new Date(at - STALE_AFTER_MS).toISOString();

/** Takes a notification for delivery by this process: false when another took it, or it is settled. */
export function takeForDelivery(sender: NotificationSender, key: NotificationKey): Promise<boolean> {
  const now = Date.now();
  return sender.store.takeNotification(key, new Date(now).toISOString(), staleBefore(now));
}

/**
 * The pipeline's notifications owed by earlier processes (they did not live to deliver them, or were aborted), at most
 * `limit`, but those `mine` says are this process's own: each taken for delivery here, as a delivery to make.
 */
export async function owedEarlier(sender: NotificationSender, pipeline: string, limit: number, mine: (record: NotificationRecord) => boolean): Promise<(() => Promise<void>)[]> {
  const owed = (await sender.store.pendingNotifications(pipeline, limit + sender.ready.webhooks.length, staleBefore(Date.now()))).filter((record) => !mine(record));
  const sends: (() => Promise<void>)[] = [];
  for (const record of owed.slice(0, limit)) {
    const key = { runId: record.runId, invocation: record.invocation, webhook: record.webhook };
    if (await takeForDelivery(sender, key)) sends.push(() => resend(sender, record).catch((error: unknown) => warnNotSent(sender, undefined, error)));
  }
  return sends;
}

/** A notification owed by an earlier process, sent as it was recorded: the same body, the same key. */
async function resend(sender: NotificationSender, record: NotificationRecord): Promise<void> {
  const key = { runId: record.runId, invocation: record.invocation, webhook: record.webhook };
  const hook = sender.ready.webhooks.find((each) => webhookKey(each.url) === record.webhook);
  if (hook === undefined || record.body === null) {
    const error = hook === undefined ? 'the webhook is no longer in the pipeline' : 'its body was not kept';
    await sender.store.settleNotification(key, { status: 'failed', attempts: 0, error, at: new Date().toISOString() });
    sender.emit({ type: 'notification', runId: record.runId, webhook: record.target, event: record.event, status: 'failed', attempts: record.attempts, error });
    return;
  }
  await send(sender, hook, key, record.event, record.body);
}

/** Delivers a notification taken for delivery, and records how it went, as an event too. */
export async function send(sender: NotificationSender, hook: Webhook, key: NotificationKey, event: string, body: string): Promise<void> {
  const target = webhookLabel(hook.url);
  const outcome: DeliveryOutcome = await deliver({
    hook,
    body,
    key: sender.ready.key,
    allowed: sender.ready.allowed,
    // The notification's idempotency key, as its body has it: the same for every attempt, every webhook and every
    // later delivery of it (at least once: the receiver drops repeats). Signed as given: a receiver joins the id, the
    // time and the body, never splits them, so a '.' in it (a missed occurrence's ISO time) is no ambiguity.
    id: `${key.runId}#${key.invocation}`,
    signal: sender.abortSignal,
    onRetry: (attempt, error, waitMs) =>
      sender.emit({ type: 'notification', runId: key.runId, webhook: target, event, status: 'retrying', attempts: attempt, error: sender.redact(error), waitMs }),
  });
  const error = outcome.status === 'delivered' ? null : sender.redact(outcome.error);
  // Aborted: still owed, left pending for the next invocation.
  const status = outcome.status === 'aborted' ? 'pending' : outcome.status;
  await sender.store.settleNotification(key, { status, attempts: outcome.attempts, error, at: new Date().toISOString() });
  sender.emit({ type: 'notification', runId: key.runId, webhook: target, event, status: outcome.status, attempts: outcome.attempts, ...(error === null ? {} : { error }) });
}

/** Something that is no webhook's answer went wrong (the store, the digest): said, never thrown into the run. */
export function warnNotSent(sender: Pick<NotificationSender, 'redact' | 'emit'>, hook: Webhook | undefined, error: unknown): void {
  const message = sender.redact(error instanceof Error ? error.message : String(error));
  sender.emit({ type: 'warning', message: `notification${hook ? ` to ${webhookLabel(hook.url)}` : 's'} not sent: ${message}` });
}
