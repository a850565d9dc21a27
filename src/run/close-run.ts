import type { Sink } from '../sinks/sink.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { SeenKeyStore } from '../state/interfaces.ts';
import type { Pipeline } from '../config/define.ts';
import type { Destination } from './destination.ts';
import type { OpenedRun } from './open-run.ts';
import { recordOutcomes } from './record-outcomes.ts';
import { runStopReason, summarize } from './summarize.ts';
import type { RunHost } from '../host/run-host.ts';
import type { RunSummary } from './summary.ts';

/** Statuses of a run that ended by its own rules (the others resume). */
const FINISHED = new Set(['completed', 'budget', 'failed_series']);

/**
 * How the last phase left the run: its summary as this process returns it, or the failure it must throw; and the
 * run's end as this process recorded it in the `runs` table — none when it left that to the run's other workers, or
 * could not write it. Whoever records the end is whoever may notify of it (docs/notifications.md).
 */
export type ClosedRun = ({ ok: true; summary: RunSummary } | { ok: false; failure: unknown }) & { recorded: RunSummary | undefined };

/**
 * The last phase: the summary, kept in the `runs` table, and how each series ended, kept beside the rows
 * (`recordOutcomes`). A run that ended by its own rules is finished (sinks told, its run-scoped dedupe keys
 * forgotten); one that failed is recorded as interrupted, and the failure handed back to be thrown.
 */
export async function closeRun(
  parts: {
    pipeline: Pipeline;
    plan: SourcePlan;
    opened: OpenedRun;
    scheduler: Scheduler;
    sinks: readonly Sink<unknown>[];
    keys: SeenKeyStore;
    destination: Destination;
    host: RunHost;
  },
  failure: unknown,
): Promise<ClosedRun> {
  const { pipeline, plan, opened, scheduler, sinks, keys, destination, host } = parts;
  const { store, runId, decision, previous, startedAt } = opened;
  const finish = async () => {
    const finishedAt = new Date();
    return summarize({
      store,
      runId,
      pipeline: pipeline.name,
      seriesTotal: plan.seriesCount,
      stop: scheduler.stopped,
      budgetReached: scheduler.budgetReached,
      budget: decision.budget?.maxCredits ?? null,
      rateLimitedWaitMs: scheduler.stats().rateLimitedWaitMs + Number(previous?.summary?.rateLimitedWaitMs ?? 0),
      destination,
      outputs: (pipeline.sinks as Sink<unknown>[]).map((sink) => ({ kind: sink.kind, path: sink.path, delivery: sink.delivery ?? 'exactly_once' })),
      startedAt: previous?.startedAt ?? startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      durationMs: finishedAt.getTime() - startedAt.getTime() + Number(previous?.summary?.durationMs ?? 0),
    });
  };
  // Whoever records the run's summary records its series' outcomes too: the last process to leave it.
  const outcomes = () => recordOutcomes({ store, plan, runId, sinks, runStop: runStopReason(scheduler.stopped, scheduler.budgetReached) });
  if (failure !== undefined) {
    let recorded: RunSummary | undefined;
    try {
      // A process that leaves a run others go on with (it was stopped, or failed) leaves the run's record to them.
      if (await host.othersAtWork()) return { ok: false, failure, recorded };
      const summary = await finish();
      await store.finishRun(runId, 'interrupted', summary.finishedAt, summary, failure instanceof Error ? failure.message : String(failure));
      await outcomes();
      recorded = summary;
    } catch {
      // The disk that failed the run may refuse this too: the run then stays "running", which the next invocation
      // resumes all the same. The failure itself is what the caller must hear about.
    }
    return { ok: false, failure, recorded };
  }
  const summary = await finish();
  // The run's summary is stored; this process's share of it is only in what it returns.
  const share = host.share();
  const mine = share ? { ...summary, worker: share } : summary;
  if (summary.status === 'interrupted' && (await host.othersAtWork())) return { ok: true, summary: mine, recorded: undefined };
  // Before the sinks finish: replace mode keeps only this run's outcomes, which must be there by then.
  await outcomes();
  if (FINISHED.has(summary.status)) {
    for (const sink of sinks) await sink.finish?.(runId);
    // Other workers may still commit pages in flight (a budget reached here first): their dedupe needs the run's keys.
    // The last worker forgets them; the next run's start does, should two finish at once.
    if (!(await host.othersAtWork())) await keys.forgetRun();
  }
  await store.finishRun(runId, summary.status, summary.finishedAt, summary);
  return { ok: true, summary: mine, recorded: summary };
}
