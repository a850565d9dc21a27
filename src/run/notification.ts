import { z } from 'zod';
import { digestSchema } from '../notify/digest-schema.ts';
import { RUN_END_EVENTS } from '../notify/webhook-config.ts';
import { RUN_STATUSES, runSummarySchema } from './summary.ts';

/**
 * What a webhook is POSTed when a run ends (docs/notifications.md#the-body): the run's summary as stored, and a digest
 * of what changed since the run before. A receiver written in TypeScript can parse it with this schema.
 */
export const notificationSchema = z.object({
  type: z.literal('run.ended'),
  /**
   * `<runId>#<invocation>`, also sent as the `webhook-id` header (signed): the same for every delivery of this end, so
   * that a receiver drops repeats. A run stopped (a quota, a budget) and resumed ends again, under a new key.
   */
  idempotencyKey: z.string(),
  runId: z.string(),
  /** Which invocation of the run ended (1 for a run that ran through at once). */
  invocation: z.int(),
  pipeline: z.string(),
  /** The end, as webhooks' `on` names it: `failed` for failed series or an invocation that failed with an error. */
  event: z.enum(RUN_END_EVENTS),
  /** The summary's status. */
  status: z.enum(RUN_STATUSES),
  /** The invocation failed with an error: what it was. */
  error: z.string().optional(),
  summary: runSummarySchema,
  digest: digestSchema,
});

export type Notification = z.infer<typeof notificationSchema>;

/**
 * What a webhook is POSTed when a worker finds scheduled occurrences missed, due while no worker was up
 * (docs/notifications.md#missed-occurrences): one notification per look that found some, from the worker that
 * recorded them. A receiver written in TypeScript can parse it with this schema, or any body with `webhookBodySchema`.
 */
export const missedNotificationSchema = z.object({
  type: z.literal('occurrence.missed'),
  /**
   * `missed:<pipeline>@<latest due time>#1`, also sent as the `idempotency-key` header: the same for every delivery of
   * this notification, so that a receiver drops repeats.
   */
  idempotencyKey: z.string(),
  pipeline: z.string(),
  event: z.literal('missed'),
  /** The pipeline's schedule, as the worker read it. */
  schedule: z.object({ cron: z.string(), timezone: z.string(), missed: z.enum(['once', 'skip']) }),
  /** The occurrences recorded missed, oldest first (ISO 8601, UTC), at most a hundred. */
  missed: z.array(z.string()),
  /** Earlier ones were missed too, and not recorded (a long gap on a frequent schedule). */
  more: z.boolean(),
  /** With `missed: 'once'`, the occurrence due after them, run once, late, in their stead; null with `skip`. */
  catchUp: z.string().nullable(),
  /** The worker that found them. */
  worker: z.string(),
});

export type MissedNotification = z.infer<typeof missedNotificationSchema>;

/** Whatever a webhook is POSTed, told apart by its `type`. */
export const webhookBodySchema = z.discriminatedUnion('type', [notificationSchema, missedNotificationSchema]);

export type WebhookBody = z.infer<typeof webhookBodySchema>;
