import { type RunRecord, UNFINISHED } from '../state/interfaces.ts';
import { RunLifecycleError } from '../errors/run-lifecycle-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { type Budget, budgetSchema } from '../schedule/budget.ts';

export interface LifecycleOptions {
  /** Abandon an unfinished run (its partial rows go) and start a new one. Finished runs are never touched. */
  fresh?: boolean | undefined;
  /** Continue a finished run that stopped on its budget, or retry its failed series. */
  resume?: boolean | undefined;
  /** With `resume`: the run's new total credit cap. */
  budget?: Budget | undefined;
}

export type Decision =
  | { mode: 'new'; abandon?: RunRecord | undefined; budget: Budget | null }
  | { mode: 'resume'; run: RunRecord; retryFailed: boolean; budget: Budget | null };

/**
 * What this invocation does (DESIGN §4): an interrupted run resumes by default; a finished run makes the next
 * invocation a new run; `resume` continues a finished run stopped by its budget (with a new cap) or retries its
 * failed series; `fresh` abandons an unfinished run. Resuming a different plan is refused.
 */
export function decide(
  latest: RunRecord | undefined,
  plan: { fingerprint: string; data: Record<string, unknown> },
  pipelineBudget: Budget | null,
  options: LifecycleOptions,
): Decision {
  // A number where the budget belongs (`budget: 500`) is refused, naming the shape, before anything is decided.
  if (options.budget !== undefined) ValidationError.parse(budgetSchema, options.budget, 'Invalid run options', 'budget');
  if (options.fresh && options.resume) throw new RunLifecycleError('`fresh: true` and `resume: true` contradict each other: choose one');
  const unfinished = latest !== undefined && UNFINISHED.has(latest.status);

  if (options.fresh) return { mode: 'new', abandon: unfinished ? latest : undefined, budget: options.budget ?? pipelineBudget };

  if (unfinished) {
    checkSamePlan(latest, plan);
    // The budget caps the run across all its resumes; a new cap may be given.
    return { mode: 'resume', run: latest, retryFailed: options.resume === true, budget: options.budget ?? recorded(latest) ?? pipelineBudget };
  }

  if (!options.resume) return { mode: 'new', budget: options.budget ?? pipelineBudget };

  if (!latest) throw new RunLifecycleError('nothing to resume: this pipeline has no runs yet (run it without `resume: true`)');
  checkSamePlan(latest, plan);
  if (latest.status === 'budget') {
    const spent = Number((latest.summary?.credits as { spent?: number } | undefined)?.spent ?? 0);
    const budget = options.budget ?? recorded(latest) ?? pipelineBudget;
    if (budget !== null && budget.maxCredits <= spent) {
      throw new RunLifecycleError(
        `run ${latest.runId} stopped on its budget after spending ${spent} credits of ${budget.maxCredits}: resume it with a larger total cap (\`budget: { maxCredits: N }\`, N > ${spent})`,
      );
    }
    return { mode: 'resume', run: latest, retryFailed: true, budget };
  }
  if (latest.status === 'failed_series') return { mode: 'resume', run: latest, retryFailed: true, budget: options.budget ?? recorded(latest) ?? pipelineBudget };
  throw new RunLifecycleError(
    `nothing to resume: the last run (${latest.runId}) ${latest.status === 'completed' ? 'completed' : `ended as ${latest.status}`}; run without \`resume: true\` to start a new run`,
  );
}

function checkSamePlan(run: RunRecord, plan: { fingerprint: string; data: Record<string, unknown> }): void {
  if (run.fingerprint === plan.fingerprint) return;
  throw new RunLifecycleError(
    `run ${run.runId} was started with a different plan, so it cannot be resumed: ${describeChange(run.plan, plan.data)}. ` +
      'Restore the previous plan to resume it, or run with `fresh: true` to abandon it (its partial rows go) and start a new run.',
  );
}

/** "queries: added "x", removed "y"; maxPages: 3 → 5". */
export function describeChange(before: Record<string, unknown>, after: Record<string, unknown>): string {
  const changes: string[] = [];
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = before[key];
    const b = after[key];
    if (JSON.stringify(a) === JSON.stringify(b)) continue;
    if (Array.isArray(a) && Array.isArray(b)) {
      const was = new Set(a.map((v) => JSON.stringify(v)));
      const now = new Set(b.map((v) => JSON.stringify(v)));
      const added = [...now].filter((v) => !was.has(v));
      const removed = [...was].filter((v) => !now.has(v));
      const parts = [added.length ? `added ${clip(added)}` : '', removed.length ? `removed ${clip(removed)}` : ''].filter(Boolean);
      changes.push(`${key}: ${parts.join(', ') || 'reordered'}`);
    } else {
      changes.push(`${key}: ${JSON.stringify(a) ?? 'none'} → ${JSON.stringify(b) ?? 'none'}`);
    }
  }
  return changes.join('; ') || 'the plan changed';
}

function clip(values: string[]): string {
  return values.length > 5 ? `${values.slice(0, 5).join(', ')} and ${values.length - 5} more` : values.join(', ');
}

/** The budget a run was recorded with (the store keeps the number). */
function recorded(run: RunRecord): Budget | null {
  return run.budget === null ? null : { maxCredits: run.budget };
}
