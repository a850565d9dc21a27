import { webhookKey, webhookLabel } from '../notify/webhook-config.ts';
import type { Schedule } from '../recurring/schedule-config.ts';
import type { MissedFound } from '../recurring/worker-loop.ts';
import type { MissedNotification } from './notification.ts';
import { type NotificationSender, send, takeForDelivery, warnNotSent } from './notification-delivery.ts';

/** A look's missed occurrences, as a worker tells the pipeline's webhooks of them. */
export interface MissedNotice {
  sender: NotificationSender;
  pipeline: string;
  schedule: Schedule;
  /** The worker that recorded them. */
  worker: string;
  found: MissedFound;
}

/**
 * Tells the webhooks whose `on` has `missed` that scheduled occurrences were missed (docs/notifications.md): one
 * notification for what one look recorded, keyed by the pipeline and the latest of them, so that it is told once
 * whatever the number of workers (each occurrence is recorded missed by one). Recorded pending with its body, taken,
 * delivered with bounded retries and settled as a run's end is: at least once (one this worker did not live to
 * deliver is sent by the pipeline's next run). Never throws: what went wrong is said.
 */
export async function notifyMissed(notice: MissedNotice): Promise<void> {
  const { sender, pipeline, found } = notice;
  const latest = found.dueAts.at(-1);
  if (latest === undefined) return;
  const id = { runId: `missed:${pipeline}@${latest}`, invocation: 1 };
  const { cron, timezone, missed } = notice.schedule;
  const body: MissedNotification = {
    type: 'occurrence.missed',
    idempotencyKey: `${id.runId}#${id.invocation}`,
    pipeline,
    event: 'missed',
    schedule: { cron, timezone, missed },
    missed: found.dueAts,
    more: found.more,
    catchUp: found.catchUp,
    worker: notice.worker,
  };
  const text = sender.redact(JSON.stringify(body));
  const hooks = sender.ready.webhooks.filter((hook) => hook.on.includes('missed'));
  await Promise.all(
    hooks.map(async (hook) => {
      try {
        const key = { ...id, webhook: webhookKey(hook.url) };
        const claimed = await sender.store.claimNotification({ ...key, pipeline, target: webhookLabel(hook.url), event: 'missed', body: text, createdAt: new Date().toISOString() });
        if (claimed && (await takeForDelivery(sender, key))) await send(sender, hook, key, 'missed', text);
      } catch (error) {
        warnNotSent(sender, hook, error);
      }
    }),
  );
}
