import { allowedHosts, hostRefused } from '../client/allowed-hosts.ts';
import { ValidationError, type ValidationIssue } from '../errors/validation-error.ts';
import { type Notify, type Webhook, webhookLabel } from './webhook-config.ts';
import { SECRET_VARIABLE, signingKey } from './webhook-secret.ts';

/** A run's webhooks, checked, and the secret that signs what they are sent. */
export interface ReadyWebhooks {
  webhooks: readonly Webhook[];
  /** The HMAC key WEBDATA_WEBHOOK_SECRET stands for (never shown: the run redacts every form of the secret). */
  key: Buffer;
}

/**
 * The pipeline's webhooks as a run may use them, checked before any credit is spent: an unsigned notification is
 * refused rather than sent (a receiver could not tell it from a forgery), and each webhook's host obeys the API's
 * allow-list, WEBDATA_ALLOWED_HOSTS, when it is set. Undefined when the pipeline has none.
 */
export function readyWebhooks(notify: Notify | undefined, env: Readonly<Record<string, string | undefined>>): ReadyWebhooks | undefined {
  if (notify === undefined) return undefined;
  const issues: ValidationIssue[] = [];
  const secret = signingKey(env[SECRET_VARIABLE]);
  if ('problem' in secret) issues.push({ path: 'notify.webhooks', message: secret.problem });
  const allowed = allowedHosts(env.WEBDATA_ALLOWED_HOSTS);
  notify.webhooks.forEach((hook, index) => {
    if (allowed === undefined || hostRefused(hook.url, allowed) === undefined) return;
    issues.push({
      path: `notify.webhooks.${index}.url`,
      message: `${new URL(webhookLabel(hook.url)).origin} is not among WEBDATA_ALLOWED_HOSTS (${allowed.join(', ')}): a run sends only to those hosts; check the webhook, or add its host`,
    });
  });
  if (issues.length > 0) throw new ValidationError('The pipeline’s webhooks cannot be used', issues);
  return { webhooks: notify.webhooks, key: (secret as { key: Buffer }).key };
}
