import { allowedHosts, hostRefused } from '../client/allowed-hosts.ts';
import { isLoopbackHost } from '../client/options.ts';
import { ValidationError, type ValidationIssue } from '../errors/validation-error.ts';
import { anAddressOf, specialAddress } from './special-addresses.ts';
import { type Notify, type Webhook, webhookLabel } from './webhook-config.ts';
import { SECRET_VARIABLE, signingKey } from './webhook-secret.ts';

/** A run's webhooks, checked, and the secret that signs what they are sent. */
export interface ReadyWebhooks {
  webhooks: readonly Webhook[];
  /** The HMAC key WEBDATA_WEBHOOK_SECRET stands for (never shown: the run redacts every form of the secret). */
  key: Buffer;
  /** WEBDATA_ALLOWED_HOSTS, read: the only hosts (and addresses) that may be private, loopback or link-local. */
  allowed: string[] | undefined;
}

/**
 * The pipeline's webhooks as a run may use them, checked before any credit is spent: an unsigned notification is
 * refused rather than sent (a receiver could not tell it from a forgery); each webhook's host obeys the API's
 * allow-list, WEBDATA_ALLOWED_HOSTS, when it is set; and a host that is a private, loopback, link-local or other
 * special address (or a loopback name) must be on that list. A name is checked again, address by address, when a
 * delivery connects (webhook-dispatcher.ts). Undefined when the pipeline has none.
 */
export function readyWebhooks(notify: Notify | undefined, env: Readonly<Record<string, string | undefined>>): ReadyWebhooks | undefined {
  if (notify === undefined) return undefined;
  const issues: ValidationIssue[] = [];
  const secret = signingKey(env[SECRET_VARIABLE]);
  if ('problem' in secret) issues.push({ path: 'notify.webhooks', message: secret.problem });
  const allowed = allowedHosts(env.WEBDATA_ALLOWED_HOSTS);
  notify.webhooks.forEach((hook, index) => {
    const problem = hostProblem(hook.url, allowed);
    if (problem !== undefined) issues.push({ path: `notify.webhooks.${index}.url`, message: problem });
  });
  if (issues.length > 0) throw new ValidationError('The pipeline’s webhooks cannot be used', issues);
  return { webhooks: notify.webhooks, key: (secret as { key: Buffer }).key, allowed };
}

/** Why a webhook's host may not be sent to; undefined when it may. */
function hostProblem(url: string, allowed: string[] | undefined): string | undefined {
  const origin = new URL(webhookLabel(url)).origin;
  if (allowed !== undefined && hostRefused(url, allowed) !== undefined) {
    return `${origin} is not among WEBDATA_ALLOWED_HOSTS (${allowed.join(', ')}): a run sends only to those hosts; check the webhook, or add its host`;
  }
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  const kind = specialAddress(host) ?? (isLoopbackHost(host) ? 'loopback' : undefined);
  if (kind === undefined || allowed?.includes(host.toLowerCase())) return undefined;
  return `${origin} is ${anAddressOf(kind)}: a pipeline's webhooks are not sent to this machine or the networks around it (private, loopback, link-local, unique-local, …) unless WEBDATA_ALLOWED_HOSTS lists the host; check the webhook, or list its host (the list then holds every host the run sends to, the API's too: e.g. WEBDATA_ALLOWED_HOSTS=api.example.com,${host})`;
}
