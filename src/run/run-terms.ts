import { basename } from 'node:path';
import { z } from 'zod';
import { RunLifecycleError } from '../errors/run-lifecycle-error.ts';
import type { Budget } from '../schedule/budget.ts';
import type { Sink } from '../sinks/sink.ts';
import type { RunRecord } from '../state/interfaces.ts';
import type { Pipeline } from '../config/define.ts';
import { describeChange } from './describe-change.ts';
import { refreshExplanationSchema } from './refresh-summary.ts';

/**
 * What decides a run's money and rows beside its source's plan (whose fingerprint is compared already), recorded with
 * the run at each planning. A worker joining a distributed run must share all of it: its requests are charged by its
 * own weights against the shared budget, its rows go to its own sinks, paced by its own idea of the rate. A process
 * resuming a run must share what decides what is paid and where the rows go (`RESUME`); the rate, and the budget (by
 * `budget` / `--budget`), may change between resumes: they say how fast and how far, not what.
 */
export const runTermsSchema = z.object({
  /** Credits per request by endpoint path (sorted by path). */
  weights: z.record(z.string(), z.number()),
  /** Each stage, in order: a built-in one with its options, a user's by its function's name. */
  stages: z.array(z.record(z.string(), z.unknown())),
  /** Each sink: its kind, where it writes (table, schema, file…), its mode and columns (sorted: their order decides nothing). */
  sinks: z.array(z.record(z.string(), z.unknown())),
  /** The plan's rate, all workers together (each worker's concurrency is its own, and not part of it). */
  rate: z.string(),
  /** The pipeline's own budget (`budget.maxCredits`), null without one. */
  budget: z.number().nullable(),
  /**
   * Its tracked domains and how deep each series goes (`track`, `refresh`), null without: they decide what is paid (depth
   * until found) and the tracked ranks beside the rows. Null too in terms recorded before there were any.
   */
  tracking: z.record(z.string(), z.unknown()).nullable().default(null),
  /**
   * The refresh plan the run opened with (`refresh.priority: 'changes'`), null without: not a term to share but the
   * run's own choice, kept with it so that a resume or a joining worker says it as the opening did (its skipped series
   * are rows of the store). Never compared; one not in a shape this version knows reads as none, rather than leaving
   * the other terms unread (and a resume unchecked).
   */
  refresh: refreshExplanationSchema.nullable().default(null).catch(null),
});

export type RunTerms = z.infer<typeof runTermsSchema>;

/** The terms a resume must share; the others may change between resumes. */
const RESUME = ['weights', 'stages', 'sinks', 'tracking'] as const;

/** The terms compared (a resume's or a joining worker's): all but the plan the run opened with. */
type Compared = Exclude<keyof RunTerms, 'refresh'>;

/** How each term is named in what a refusal says. */
const NAMES: Record<Compared, string> = { weights: 'credit weights', stages: 'stages', sinks: 'sinks', rate: 'rate', budget: 'budget', tracking: 'tracked domains' };

/** The pipeline's terms; `stateDatabase` is the state store's database (a sink on it is named so, reached by any URL). */
export function runTerms(pipeline: Pipeline, stateDatabase: string): RunTerms {
  const rate = pipeline.rate;
  return {
    weights: Object.fromEntries(Object.entries(pipeline.credits.weights).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    stages: pipeline.stages.map((stage) => (stage as { terms?: Record<string, unknown> }).terms ?? { stage: stage.name || '(anonymous)' }),
    sinks: (pipeline.sinks as Sink<unknown>[]).map((sink) => sinkTerms(sink, stateDatabase)).sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)),
    rate: rate.requestsPerSecond ? `${rate.requestsPerSecond} requests/s` : rate.requests && rate.intervalMs ? `${rate.requests} requests per ${rate.intervalMs} ms` : 'unpaced',
    budget: pipeline.budget?.maxCredits ?? null,
    tracking: pipeline.track ? { track: pipeline.track, refresh: pipeline.refresh ?? { depth: 'full', margin: 0 } } : null,
    refresh: null,
  };
}

/**
 * A sink as it decides rows: what it says of itself (`Sink.terms`), else its identity. A sink on the state's own
 * database is named so (each worker may reach it by another host name); a file of each worker's own by its name alone
 * (each machine has its own directory).
 */
function sinkTerms(sink: Sink<unknown>, stateDatabase: string): Record<string, unknown> {
  const own: Record<string, unknown> = { ...(sink.terms ?? { id: sink.id }) };
  if (own.database === stateDatabase) own.database = 'the state database';
  if (sink.perWorker === true && typeof own.file === 'string') own.file = basename(own.file);
  return { kind: sink.kind, ...own };
}

/**
 * Refuses to resume `run` with terms that decide other money or rows (before anything is sent), naming what changed.
 * A run recorded before terms were is not compared (this invocation records them).
 */
export function checkResumeTerms(run: RunRecord, terms: RunTerms): void {
  const changes = termChanges(recordedTerms(run), terms, RESUME);
  if (changes === '') return;
  throw new RunLifecycleError(
    `run ${run.runId} was started with other terms, which decide what is paid and where its rows go, so it cannot be resumed: ${changes}. ` +
      'Restore them to resume it, or run with `fresh: true` to abandon it (its partial rows go) and start a new run.',
  );
}

/**
 * Refuses a process that would join `run` (at work) with another plan or other terms, before it sends anything,
 * naming every difference: every worker must run the same pipeline. `budget`: a budget this process was given
 * (`--budget`), which must be the run's own.
 */
export function checkJoinTerms(run: RunRecord, plan: { fingerprint: string; data: Record<string, unknown> }, terms: RunTerms, budget: Budget | undefined): void {
  const changes = [
    run.fingerprint === plan.fingerprint ? '' : describeChange(run.plan, plan.data),
    termChanges(recordedTerms(run), terms, Object.keys(NAMES) as Compared[]),
    budget === undefined || budget.maxCredits === run.budget ? '' : `budget: the run's is ${run.budget === null ? 'none' : `${run.budget} credits`}, this worker was given ${budget.maxCredits}`,
  ].filter(Boolean);
  if (changes.length === 0) return;
  throw new RunLifecycleError(
    `this process cannot join run ${run.runId} of pipeline "${run.pipeline}", at work: its pipeline differs from the run's in ${changes.join('; ')}. ` +
      'Every worker runs the same pipeline file with the same flags: start it as the others were, or stop them all and start the run again (`fresh: true` abandons it).',
  );
}

/** The terms a run recorded, or null: none recorded (an earlier webdata-etl), or not in a shape this one knows. */
export function recordedTerms(run: RunRecord): RunTerms | null {
  const parsed = runTermsSchema.safeParse(run.terms);
  return parsed.success ? parsed.data : null;
}

/** "credit weights: {} → {"/search":0}; sinks: added …" for the terms in `which` that differ; '' when none does. */
function termChanges(recorded: RunTerms | null, terms: RunTerms, which: readonly Compared[]): string {
  if (recorded === null) return '';
  const view = (of: RunTerms) => Object.fromEntries(which.map((key) => [NAMES[key], of[key]]));
  const before = view(recorded);
  const after = view(terms);
  const differ = which.some((key) => JSON.stringify(before[NAMES[key]]) !== JSON.stringify(after[NAMES[key]]));
  return differ ? describeChange(before, after) : '';
}
