import type { RunSummary } from '../run/summary.ts';

/**
 * The summary's last line: what to do next, when a run did not finish, or finished without a key of its pool. Only
 * what can help: after a 401 the same command with the same key is refused again, so the line says which credential
 * to fix (and that the run then resumes where it stopped: nothing it committed is lost).
 */
export function nextStep(summary: RunSummary): string | undefined {
  if (summary.resumeAt) return `resume after ${summary.resumeAt} with the same command`;
  // A key out of its allowance needs no one: it serves again in its next period.
  const retired = (summary.keys ?? []).filter((key) => key.retired !== null && key.retired.reason !== 'allowance');
  if (summary.reason === 'unauthorized') {
    const fix = retired.length > 0 ? fixKeys(retired, summary.destination.credentials) : fixCredentials(summary.destination.credentials);
    return `${fix}, then run the same command: the run resumes where it stopped (with the same credentials it is refused again)`;
  }
  if (summary.status === 'interrupted' || summary.status === 'stopped') return 'run the same command again to resume (or join the workers still at it)';
  // The others finished the run: the retired key needs a person before the next one.
  if (retired.length > 0) return `${fixKeys(retired, summary.destination.credentials).replace(/^fix/, 'check')}: the other keys did its share of this run`;
  return undefined;
}

/** "fix the key slow in WEBDATA_API_KEYS (retired: unauthorized)", from the pool's retired keys. */
function fixKeys(retired: NonNullable<RunSummary['keys']>, credentials: string): string {
  const source = /keys from ([A-Z][A-Z0-9_]*)/.exec(credentials)?.[1] ?? 'WEBDATA_API_KEYS';
  const labels = retired.map((key) => `${key.label} (retired: ${key.retired?.reason}${key.retired?.path ? ` for ${key.retired.path}` : ''})`);
  return `fix the key${retired.length === 1 ? '' : 's'} ${labels.join(', ')} in ${source}`;
}

/**
 * "fix the key in WEBDATA_API_KEY", "fix the token in WEBDATA_TOKEN (a JWT may have expired)", from the summary's
 * `destination.credentials` (`key from WEBDATA_API_KEY`, `token from WEBDATA_TOKEN`, `key from run() options`, …).
 */
function fixCredentials(credentials: string): string {
  const match = /^(key|token) from (.+)$/.exec(credentials);
  if (!match) return 'set WEBDATA_API_KEY (or WEBDATA_TOKEN for a JWT)';
  const [, kind, source] = match as unknown as [string, string, string];
  const where = /^[A-Z][A-Z0-9_]*$/.test(source) ? `the ${kind} in ${source}` : `the ${kind} (from ${source})`;
  return `fix ${where}${kind === 'token' ? ' (a JWT may have expired)' : ''}`;
}
