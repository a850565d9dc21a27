// webdata-etl/notifications: what a webhook receiver needs (docs/notifications.md) — the bodies a pipeline's webhooks
// are POSTed, as zod schemas, and the check of their Standard Webhooks signature. A door of its own, for a program that
// receives and never runs a pipeline; at the roof, because the schemas are run/'s (a run's summary) and the check is
// notify/'s.
export { type MissedNotification, missedNotificationSchema, notificationSchema, type Notification, type WebhookBody, webhookBodySchema } from './run/notification.ts';
export { verifyWebhookSignature, type DeliveryHeaders, type VerifiedDelivery } from './notify/sign.ts';
