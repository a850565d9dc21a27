import type { Sink } from '../sinks/sink.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { SeenKeyStore } from '../state/interfaces.ts';
import type { ReadyWebhooks } from '../notify/ready-webhooks.ts';
import type { Pipeline } from '../config/define.ts';
import type { Destination } from './destination.ts';
import { type OwedNotifications, recordRunEnd } from './notify-end.ts';
import type { Held, OpenedRun } from './open-run.ts';
import { recordOutcomes } from './record-outcomes.ts';
import { recordTracked } from './record-tracked.ts';
import { pipelineTracking } from './tracking.ts';
import type { RunEvent } from './run-types.ts';
import { releaseSink } from './sinks-in-use.ts';
import { runStopReason, summarize } from './summarize.ts';
import type { RefreshExplanation } from './refresh-summary.ts';
import { summaryKeys } from './summary-keys.ts';
import type { RunHost } from '../host/run-host.ts';
import type { RunSummary } from './summary.ts';
import { phase } from '../phase-marks.ts';

/** Statuses of a run that ended by its own rules (the others resume). */
const FINISHED = new Set(['completed', 'budget', 'failed_series']);

/**
 * How the last phase left the run: its summary as this process returns it, or the failure it must throw; and the
 * run's end as this process recorded it in the `runs` table — none when it left that to the run's other workers, or
 * could not write it. Whoever records the end is whoever may notify of it (docs/notifications.md).
 */
type EndedRun = ({ ok: true; summary: RunSummary } | { ok: false; failure: unknown }) & { recorded: RunSummary | undefined };

/** How the run closed, and what the webhooks are owed for its end: delivered once this process has left it (`leaveRun`). */
export type ClosedRun = EndedRun & { owed: OwedNotifications | undefined };

/** What closing needs: the run as it went, and how to tell the pipeline's webhooks of its end. */
export interface Closing {
  pipeline: Pipeline;
  plan: SourcePlan;
  opened: OpenedRun;
  scheduler: Scheduler;
  sinks: readonly Sink<unknown>[];
  keys: SeenKeyStore;
  destination: Destination;
  host: RunHost;
  /** The pipeline's webhooks, checked before the run (none: it has none). */
  webhooks: ReadyWebhooks | undefined;
  /** Redacts the run's secrets from what a notification carries or stores. */
  redact: (text: string) => string;
  emit: (event: RunEvent) => void;
  /** The run's abort (a second Ctrl-C): deliveries stop at once and stay pending for the next invocation. */
  abortSignal: AbortSignal | undefined;
  /** The run's refresh plan as it stands now (none: every series is fetched). */
  refresh?: (() => RefreshExplanation | undefined) | undefined;
}

/**
 * The last phase (docs/design.md#the-phases-of-a-run): the run's end recorded (`endRun`), then, when this process
 * recorded it and the pipeline has webhooks, what each is owed for it recorded while the lease is held
 * (`recordRunEnd`), for `leaveRun` to deliver once the lease is released. The exit code is decided by then: the
 * webhooks never fail the run.
 */
export async function closeRun(closing: Closing, failure: unknown): Promise<ClosedRun> {
  const ended = await endRun(closing, failure);
  const { webhooks, opened, pipeline } = closing;
  if (!webhooks || !ended.recorded) return { ...ended, owed: undefined };
  const owed = await recordRunEnd({
    opened,
    pipeline: pipeline.name,
    summary: ended.recorded,
    ...(ended.ok ? {} : { failure: ended.failure }),
    ready: webhooks,
    redact: closing.redact,
    emit: closing.emit,
    abortSignal: closing.abortSignal,
  });
  return { ...ended, owed };
}

/**
 * This process leaves the run, however it ended: its host (a worker's row says how it left: its summary's status, or
 * `failed` when it did not close), the pipeline's lease, its sinks. Only then are the webhooks sent what the close
 * recorded they are owed, so that a receiver slow to answer never holds up the pipeline's next run
 * (docs/notifications.md#retries-and-bounds).
 */
export async function leaveRun(held: Held, closed: ClosedRun | undefined): Promise<void> {
  try {
    phase('leaving');
    await held.host?.leave(closed?.ok ? closed.summary.status : 'failed');
    phase('left');
    await held.lease?.release();
    for (const sink of held.sinks) {
      try {
        await sink.close();
      } finally {
        releaseSink(sink);
      }
    }
  } finally {
    // The lease is released and the sinks closed: the pipeline's next run may begin while the webhooks are told.
    await closed?.owed?.deliver();
  }
}

/**
 * The run's end recorded: the summary, kept in the `runs` table, and how each series ended, kept beside the rows
 * (`recordOutcomes`). A run that ended by its own rules is finished (sinks told, its run-scoped dedupe keys
 * forgotten); one that failed is recorded as interrupted, and the failure handed back to be thrown.
 */
async function endRun(parts: Closing, failure: unknown): Promise<EndedRun> {
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
      ...summaryKeys(scheduler.stats().keys, previous?.summary),
      refresh: parts.refresh?.(),
    });
  };
  // Whoever records the run's summary records its series' outcomes too: the last process to leave it.
  // And the tracked domains' ranks, beside them (docs/pipelines.md#tracked-domains-and-depth-until-found).
  const outcomes = async () => {
    phase('outcomes');
    await recordOutcomes({ store, plan, runId, sinks, runStop: runStopReason(scheduler.stopped, scheduler.budgetReached) });
    await recordTracked({ store, plan, runId, sinks, tracking: pipelineTracking(pipeline) });
    phase('outcomes-recorded');
  };
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
  // A worker stopped alone (a signal, or its keys' allowances, which the others find spent in their turn) leaves the
  // run's record to those still at work.
  if ((summary.status === 'interrupted' || summary.status === 'allowance') && (await host.othersAtWork())) return { ok: true, summary: mine, recorded: undefined };
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
