import { type RunRecord, UNFINISHED } from '../state/interfaces.ts';
import { RunAtWorkError } from '../errors/run-at-work-error.ts';
import { RunEndedError } from '../errors/run-ended-error.ts';
import { RunLifecycleError } from '../errors/run-lifecycle-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { type Budget, budgetSchema } from '../schedule/budget.ts';
import type { RunTake } from '../recurring/run-take.ts';
import { describeChange } from './describe-change.ts';
import { checkResumeTerms, type RunTerms } from './run-terms.ts';

export interface LifecycleOptions {
  /** Abandon an unfinished run (its partial rows go) and start a new one. Finished runs are never touched. */
  fresh?: boolean | undefined;
  /** Continue a finished run that stopped on its budget, or retry its failed series. */
  resume?: boolean | undefined;
  /** With `resume`: the run's new total credit cap. */
  budget?: Budget | undefined;
  /** What a scheduled occurrence's invocation may take (`webdata-etl worker`): see `RunTake` (recurring/run-take.ts). */
  take?: RunTake | undefined;
}

/**
 * Refuses what a scheduled invocation may not take (`RunTake`), before anything changes: `latest` is the pipeline's
 * latest run, `atWork` whether it has workers at work (a distributed run that this invocation would otherwise join).
 */
export function checkTake(take: RunTake | undefined, pipeline: string, latest: RunRecord | undefined, atWork: boolean): void {
  if (take === undefined) return;
  if (take.kind === 'start') {
    if (latest && atWork) throw new RunAtWorkError(`run ${latest.runId} of pipeline "${pipeline}" is at work: a scheduled occurrence does not start another while it is`, latest.runId);
    return;
  }
  if (latest?.runId !== take.runId || !UNFINISHED.has(latest.status)) {
    const now = latest?.runId === take.runId ? `ended (${latest.status})` : latest ? `is no longer the pipeline's latest (${latest.runId} is)` : 'is not on record';
    throw new RunEndedError(`run ${take.runId} of pipeline "${pipeline}" ${now}: nothing to join or resume`, take.runId);
  }
}

export type Decision =
  | { mode: 'new'; abandon?: RunRecord | undefined; budget: Budget | null }
  | { mode: 'resume'; run: RunRecord; retryFailed: boolean; budget: Budget | null };

/**
 * What this invocation does (docs/design.md#runs-and-their-lifecycle): an interrupted run resumes by default; a
 * finished run makes the next invocation a new run; `resume` continues a finished run stopped by its budget (with a new
 * cap) or retries its failed series; `fresh` abandons an unfinished run. Resuming a different plan, or other terms that
 * decide what is paid and where rows go (`checkResumeTerms`), is refused.
 */
export function decide(
  latest: RunRecord | undefined,
  plan: { fingerprint: string; data: Record<string, unknown>; terms: RunTerms },
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

function checkSamePlan(run: RunRecord, plan: { fingerprint: string; data: Record<string, unknown>; terms: RunTerms }): void {
  if (run.fingerprint === plan.fingerprint) return checkResumeTerms(run, plan.terms);
  throw new RunLifecycleError(
    `run ${run.runId} was started with a different plan, so it cannot be resumed: ${describeChange(run.plan, plan.data)}. ` +
      'Restore the previous plan to resume it, or run with `fresh: true` to abandon it (its partial rows go) and start a new run.',
  );
}

/** The budget a run was recorded with (the store keeps the number). */
function recorded(run: RunRecord): Budget | null {
  return run.budget === null ? null : { maxCredits: run.budget };
}
