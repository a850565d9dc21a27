import type { RunSummary } from '../run/summary.ts';

/** Exit codes of `webdata-etl` and of pipeline files run with node (docs/cli.md: "Exit codes"). */
export const EXIT = {
  /** Finished: status `completed` or `budget`. */
  ok: 0,
  unexpected: 1,
  /**
   * Invalid configuration or usage, including bad local input (a query file, a pipeline file that cannot be loaded), a
   * changed plan on resume, and an output or state file that cannot be written, is not a SQLite database, or is damaged.
   */
  usage: 2,
  /** Authentication failed (401). */
  authentication: 3,
  /** Plan, permission, credits or quota (402, 403, a quota-length 429). */
  plan: 4,
  /** Finished with failed series. */
  failedSeries: 5,
  /** Try again later: the stall breaker, the 429 retry budget spent, the lease held by another run, a full disk, a locked database, a worker presumed dead by the others. */
  tryLater: 75,
  /** Interrupted by a signal: resumable. */
  interrupted: 130,
} as const;

/** When several apply, the first in this order wins. */
const PRECEDENCE = [EXIT.usage, EXIT.authentication, EXIT.plan, EXIT.interrupted, EXIT.tryLater, EXIT.failedSeries, EXIT.unexpected, EXIT.ok];

const USAGE_ERRORS = new Set(['ValidationError', 'UsageError', 'RunLifecycleError']);
/** Output problems that waiting cannot fix: the user must choose another path or file. */
const USAGE_OUTPUT_PROBLEMS = new Set(['read_only', 'corrupt', 'invalid_path', 'permission']);

/** The exit code of a run that ended with a summary, an error, or (rarely) both. */
export function exitCodeFor(outcome: { summary?: RunSummary | undefined; error?: unknown }): number {
  const codes = new Set<number>();
  const { summary, error } = outcome;
  if (error !== undefined) {
    const name = (error as { name?: string }).name ?? '';
    // By name, not instanceof: a pipeline file may import the built package while the CLI runs from source.
    if (USAGE_ERRORS.has(name) || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) codes.add(EXIT.usage);
    else if (name === 'LeaseHeldError' || name === 'RunAtWorkError') codes.add(EXIT.tryLater);
    else if (name === 'OutputError') codes.add(USAGE_OUTPUT_PROBLEMS.has(String((error as { problem?: unknown }).problem)) ? EXIT.usage : EXIT.tryLater);
    else codes.add(EXIT.unexpected);
  }
  if (summary) {
    if (summary.status === 'stopped') {
      if (summary.reason === 'unauthorized') codes.add(EXIT.authentication);
      else if (summary.reason === 'stall') codes.add(EXIT.tryLater);
      else codes.add(EXIT.plan);
    }
    // A worker presumed dead by the others was not signalled: it may join its run again, so it is a failure to try
    // again (a supervisor's `Restart=on-failure` brings it back), not the clean stop a signal's 130 tells.
    if (summary.status === 'interrupted') codes.add(summary.reason === 'presumed_dead' ? EXIT.tryLater : EXIT.interrupted);
    if (summary.series.failedBy.rate_limited) codes.add(EXIT.tryLater);
    if (summary.series.failed > 0) codes.add(EXIT.failedSeries);
    codes.add(EXIT.ok);
  }
  return PRECEDENCE.find((code) => codes.has(code)) ?? EXIT.unexpected;
}

/** A command that failed, said as the command line says it: a message on stderr, no stack trace. Returns its exit code. */
export function reportFailure(error: unknown): number {
  process.stderr.write(`webdata-etl: ${error instanceof Error ? error.message : String(error)}\n`);
  return exitCodeFor({ error });
}
