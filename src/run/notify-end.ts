import { crashPoint } from '../crash-points.ts';
import { type Digest, runDigest } from '../notify/digest.ts';
import { deliver, type DeliveryOutcome } from '../notify/deliver.ts';
import type { ReadyWebhooks } from '../notify/ready-webhooks.ts';
import { type NotifyEvent, type Webhook, webhookKey, webhookLabel } from '../notify/webhook-config.ts';
import type { NotificationKey, NotificationRecord } from '../state/interfaces.ts';
import type { Notification } from './notification.ts';
import type { OpenedRun } from './open-run.ts';
import type { RunEvent } from './run-types.ts';
import type { RunSummary } from './summary.ts';

/** Pending notifications of earlier ends sent again by one invocation, at most: the rest wait for the next. */
const PENDING_PER_INVOCATION = 20;

/** Characters of an invocation's error a notification carries. */
const MAX_ERROR_CHARS = 1000;

export interface RunEnd {
  opened: OpenedRun;
  pipeline: string;
  /** The run's end as this process recorded it. */
  summary: RunSummary;
  /** The invocation failed with this error (the run is recorded `interrupted`). */
  failure?: unknown;
  ready: ReadyWebhooks;
  /** Redacts the run's secrets (the API key or token, the webhook secret) from what is sent or stored. */
  redact: (text: string) => string;
  emit: (event: RunEvent) => void;
  /** The run's abort (a second Ctrl-C): deliveries stop at once and stay pending for the next invocation. */
  abortSignal?: AbortSignal | undefined;
}

/**
 * Tells the pipeline's webhooks that the run ended (docs/notifications.md), once the end is recorded: each webhook
 * whose `on` has the end is sent the summary and a digest of what changed. Each notification is recorded pending
 * with its body before it is sent, by one process (the claim: a distributed run's workers each record the end, one
 * sends it), then delivered or failed; one a process did not live to finish is sent again by the pipeline's next
 * invocation, with the same body and key. Bounded in time, and never throws: the run's summary and exit code are
 * what they were, whatever the webhooks do.
 */
export async function notifyRunEnd(end: RunEnd): Promise<void> {
  const { opened, ready, summary } = end;
  const event = endEvent(summary, end.failure !== undefined);
  const current = { runId: opened.runId, invocation: opened.invocation };
  const sends: Promise<void>[] = [];
  try {
    const digests = new Map<string, Promise<Digest>>();
    for (const hook of ready.webhooks.filter((each) => each.on.includes(event))) {
      sends.push(
        (async () => {
          const scope = `${hook.top}/${hook.minRankMove}`;
          let digest = digests.get(scope);
          if (!digest) {
            digest = runDigest({ runId: opened.runId, store: opened.store, changes: opened.changes, failedSeries: summary.series.failed, top: hook.top, minRankMove: hook.minRankMove });
            digests.set(scope, digest);
          }
          const body = end.redact(JSON.stringify(notification(end, event, await digest)));
          const key = { ...current, webhook: webhookKey(hook.url) };
          const claimed = await opened.store.claimNotification({ ...key, pipeline: end.pipeline, target: webhookLabel(hook.url), event, body, createdAt: new Date().toISOString() });
          if (!claimed) return;
          crashPoint('notification-claimed');
          await send(end, hook, key, event, body);
        })().catch((error: unknown) => warn(end, hook, error)),
      );
    }
    // Ends of earlier invocations whose process did not live to deliver them (this one's own are claimed above).
    const pending = (await opened.store.pendingNotifications(end.pipeline, PENDING_PER_INVOCATION + ready.webhooks.length)).filter(
      (record) => !(record.runId === current.runId && record.invocation === current.invocation),
    );
    for (const record of pending.slice(0, PENDING_PER_INVOCATION)) sends.push(resend(end, record).catch((error: unknown) => warn(end, undefined, error)));
  } catch (error) {
    warn(end, undefined, error);
  }
  await Promise.all(sends);
}

/** How the run ended, as webhooks' `on` names it. */
export function endEvent(summary: RunSummary, failed: boolean): NotifyEvent {
  if (failed) return 'failed';
  return summary.status === 'failed_series' ? 'failed' : summary.status;
}

function notification(end: RunEnd, event: NotifyEvent, digest: Digest): Notification {
  const { opened, summary } = end;
  const error = end.failure === undefined ? undefined : (end.failure instanceof Error ? end.failure.message : String(end.failure)).slice(0, MAX_ERROR_CHARS);
  return {
    type: 'run.ended',
    idempotencyKey: `${opened.runId}#${opened.invocation}`,
    runId: opened.runId,
    invocation: opened.invocation,
    pipeline: end.pipeline,
    event,
    status: summary.status,
    ...(error === undefined ? {} : { error }),
    summary,
    digest,
  };
}

/** A pending notification of an earlier end, sent again as it was recorded: the same body, the same key. */
async function resend(end: RunEnd, record: NotificationRecord): Promise<void> {
  const key = { runId: record.runId, invocation: record.invocation, webhook: record.webhook };
  const hook = end.ready.webhooks.find((each) => webhookKey(each.url) === record.webhook);
  if (hook === undefined || record.body === null) {
    const error = hook === undefined ? 'the webhook is no longer in the pipeline' : 'its body was not kept';
    await end.opened.store.settleNotification(key, { status: 'failed', attempts: 0, error, at: new Date().toISOString() });
    end.emit({ type: 'notification', runId: record.runId, webhook: record.target, event: record.event, status: 'failed', attempts: record.attempts, error });
    return;
  }
  await send(end, hook, key, record.event, record.body);
}

/** Delivers a recorded notification and records how it went, as an event too. */
async function send(end: RunEnd, hook: Webhook, key: NotificationKey, event: string, body: string): Promise<void> {
  const target = webhookLabel(hook.url);
  const outcome: DeliveryOutcome = await deliver({
    hook,
    body,
    key: end.ready.key,
    allowed: end.ready.allowed,
    // The end's idempotency key, as the body has it: the same for every attempt, every webhook and every later
    // delivery of this end (at least once: the receiver drops repeats). Run ids hold no '.', which the signed text
    // uses as its separator.
    id: `${key.runId}#${key.invocation}`,
    signal: end.abortSignal,
    onRetry: (attempt, error, waitMs) =>
      end.emit({ type: 'notification', runId: key.runId, webhook: target, event, status: 'retrying', attempts: attempt, error: end.redact(error), waitMs }),
  });
  const error = outcome.status === 'delivered' ? null : end.redact(outcome.error);
  // Aborted: still owed, left pending for the next invocation.
  const status = outcome.status === 'aborted' ? 'pending' : outcome.status;
  await end.opened.store.settleNotification(key, { status, attempts: outcome.attempts, error, at: new Date().toISOString() });
  end.emit({ type: 'notification', runId: key.runId, webhook: target, event, status: outcome.status, attempts: outcome.attempts, ...(error === null ? {} : { error }) });
}

/** Something that is no webhook's answer went wrong (the store, the digest): said, never thrown into the run. */
function warn(end: RunEnd, hook: Webhook | undefined, error: unknown): void {
  const message = end.redact(error instanceof Error ? error.message : String(error));
  end.emit({ type: 'warning', message: `notification${hook ? ` to ${webhookLabel(hook.url)}` : 's'} not sent: ${message}` });
}
