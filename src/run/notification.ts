import { z } from 'zod';
import { digestSchema } from '../notify/digest.ts';
import { NOTIFY_EVENTS } from '../notify/webhook-config.ts';
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
  event: z.enum(NOTIFY_EVENTS),
  /** The summary's status. */
  status: z.enum(RUN_STATUSES),
  /** The invocation failed with an error: what it was. */
  error: z.string().optional(),
  summary: runSummarySchema,
  digest: digestSchema,
});

export type Notification = z.infer<typeof notificationSchema>;
