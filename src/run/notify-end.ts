import { crashPoint } from '../crash-points.ts';
import { type Digest, runDigest } from '../notify/digest.ts';
import type { ReadyWebhooks } from '../notify/ready-webhooks.ts';
import { type RunEndEvent, webhookKey, webhookLabel } from '../notify/webhook-config.ts';
import type { Notification } from './notification.ts';
import { type NotificationSender, owedEarlier, send, takeForDelivery, warnNotSent } from './notification-delivery.ts';
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

/** What this process owes the webhooks of a run's end, recorded and taken for delivery: `deliver()` sends it. */
export interface OwedNotifications {
  /** Bounded in time, and never throws. */
  deliver(): Promise<void>;
}

/**
 * Tells the pipeline's webhooks that the run ended (docs/notifications.md), in two steps. First, while the run still
 * holds its lease, once the end is recorded: each webhook whose `on` has the end gets a notification, the summary and
 * a digest of what changed, recorded pending with its body by one process (the claim: a distributed run's workers
 * each record the end, one sends it) and taken for delivery by it; so are the notifications earlier processes did not
 * live to deliver. Then `deliver()`, once the lease is released: a receiver slow to answer holds up no run of the
 * pipeline (what is owed is recorded, for whoever comes next). Each is delivered or failed; one a process did not live
 * to finish is sent again by a later invocation, with the same body and key. Never throws: the run's summary and exit
 * code are what they were, whatever the webhooks do.
 */
export async function recordRunEnd(end: RunEnd): Promise<OwedNotifications> {
  const { opened, ready, summary } = end;
  const sender: NotificationSender = { store: opened.store, ready, redact: end.redact, emit: end.emit, abortSignal: end.abortSignal };
  const event = endEvent(summary, end.failure !== undefined);
  const current = { runId: opened.runId, invocation: opened.invocation };
  const sends: (() => Promise<void>)[] = [];
  try {
    const digests = new Map<string, Promise<Digest>>();
    const claims = ready.webhooks
      .filter((each) => each.on.includes(event))
      .map(async (hook) => {
        try {
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
          if (await takeForDelivery(sender, key)) sends.push(() => send(sender, hook, key, event, body).catch((error: unknown) => warnNotSent(sender, hook, error)));
        } catch (error) {
          warnNotSent(sender, hook, error);
        }
      });
    await Promise.all(claims);
    // Ends of earlier invocations whose process did not live to deliver them (this one's own are claimed above), sent
    // first: they are the older.
    sends.unshift(...(await owedEarlier(sender, end.pipeline, PENDING_PER_INVOCATION, (record) => record.runId === current.runId && record.invocation === current.invocation)));
  } catch (error) {
    warnNotSent(sender, undefined, error);
  }
  return { deliver: async () => void (await Promise.all(sends.map((each) => each()))) };
}

/** How the run ended, as webhooks' `on` names it. */
export function endEvent(summary: RunSummary, failed: boolean): RunEndEvent {
  if (failed) return 'failed';
  return summary.status === 'failed_series' ? 'failed' : summary.status;
}

function notification(end: RunEnd, event: RunEndEvent, digest: Digest): Notification {
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
