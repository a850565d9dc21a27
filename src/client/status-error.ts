import { AuthenticationError } from '../errors/authentication-error.ts';
import { BadRequestError } from '../errors/bad-request-error.ts';
import { PlanError } from '../errors/plan-error.ts';
import { RateLimitError } from '../errors/rate-limit-error.ts';
import { ServerError } from '../errors/server-error.ts';
import { UnexpectedStatusError } from '../errors/unexpected-status-error.ts';
import { type WebDataError, type WebDataErrorDetails } from '../errors/web-data-error.ts';
import { describeWait, parseRetryAfter } from './retry-after.ts';

export interface FailedResponse extends WebDataErrorDetails {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Applied to every header value kept in the error (a Location can carry anything). */
  redact: (text: string) => string;
  now?: number;
}

/** Maps a response of status >= 300 to its error class, with a message that says what to do. */
export function statusError(response: FailedResponse): WebDataError {
  const { status, headers, redact, now, ...details } = response;
  const at = `${details.method ?? 'GET'} ${details.path} → ${status}`;
  const context = describeContext(details);
  const notCharged = '(not charged)';

  if (status === 400) {
    return new BadRequestError(`${at} Bad Request: the server refused the request as invalid ${notCharged}.${context}`, {
      ...details,
      status,
    });
  }
  if (status === 401) {
    return new AuthenticationError(
      `${at} Unauthorized: the API key is missing or invalid ${notCharged}. ` +
        `Check WEBDATA_API_KEY: its value, whether the key is active, and that it belongs to this environment.${context}`,
      { ...details, status },
    );
  }
  if (status === 402 || status === 403) {
    return new PlanError(
      `${at} ${status === 402 ? 'Payment Required' : 'Forbidden'}: a plan, permission, credit or billing problem, ` +
        `or the endpoint is not available to this key ${notCharged}. Check plan access, endpoint permissions, credits and billing in the console.${context}`,
      { ...details, status },
    );
  }
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(headers['retry-after'], now);
    const wait = retryAfterMs === undefined ? 'no usable Retry-After' : `Retry-After ${describeWait(retryAfterMs)}`;
    return new RateLimitError(
      `${at} Too Many Requests: rate or quota limit exceeded (${wait}) ${notCharged}. Back off and reduce concurrency.${context}`,
      { ...details, status, retryAfterMs },
    );
  }
  if (status >= 500) {
    return new ServerError(`${at}: temporary server or upstream failure ${notCharged}; safe to retry with backoff.${context}`, {
      ...details,
      status,
    });
  }
  const raw = first(headers.location);
  const location = raw === undefined ? undefined : redact(raw);
  const redirect = status >= 300 && status < 400;
  return new UnexpectedStatusError(
    redirect
      ? `${at}: a redirect${location ? ` to ${location}` : ''}, which the contract counts as a failure and we do not follow ${notCharged}. ` +
          `Check the base URL.${context}`
      : `${at}: unexpected status ${notCharged}.${context}`,
    { ...details, status, location },
  );
}

function describeContext(details: WebDataErrorDetails): string {
  const parts: string[] = [];
  if (details.requestId) parts.push(`request id ${details.requestId}`);
  if (details.body) parts.push(`server said: ${details.body}`);
  return parts.length > 0 ? ` [${parts.join('; ')}]` : '';
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
