import type { RunSummary } from '../run/summary.ts';

/**
 * The summary's last line: what to do next, when a run did not finish. Only what can help: after a 401 the same
 * command with the same key is refused again, so the line says which credential to fix (and that the run then resumes
 * where it stopped: nothing it committed is lost).
 */
export function nextStep(summary: RunSummary): string | undefined {
  if (summary.resumeAt) return `resume after ${summary.resumeAt} with the same command`;
  if (summary.reason === 'unauthorized') {
    return `${fixCredentials(summary.destination.credentials)}, then run the same command: the run resumes where it stopped (with the same credentials it is refused again)`;
  }
  if (summary.status === 'interrupted' || summary.status === 'stopped') return 'run the same command again to resume (or join the workers still at it)';
  return undefined;
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
