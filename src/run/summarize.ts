import type { StopInfo } from '../schedule/scheduler.ts';
import { COMPLETE_REASONS, type SeriesEndReason } from '../sources/source.ts';
import type { StateStore } from '../state/interfaces.ts';
import type { RunStatus, RunSummary } from './summary.ts';
import type { RefreshExplanation } from './refresh-summary.ts';
import { SKIPPED } from '../sinks/series-outcomes.ts';

export interface RunFacts {
  store: StateStore;
  runId: string;
  pipeline: string;
  seriesTotal: number;
  /** This invocation's run-wide stop, if any. */
  stop: StopInfo | undefined;
  /** The budget turned a request away, or left series unstarted. */
  budgetReached: boolean;
  budget: number | null;
  rateLimitedWaitMs: number;
  outputs: RunSummary['outputs'];
  destination: RunSummary['destination'];
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  /** A pool's keys (none for one key). */
  keys?: RunSummary['keys'];
  /** The run's refresh plan, as it stands (none: every series is fetched). */
  refresh?: RefreshExplanation | undefined;
}

/**
 * Why the series a run left under way or never reached did not end: the run's stop, else the budget (sources stop
 * starting series when it cannot take another request), else an interruption.
 */
export function runStopReason(stop: StopInfo | undefined, budgetReached: boolean): string {
  return stop?.reason ?? (budgetReached ? 'budget' : 'interrupted');
}

/**
 * The summary of a run across all its invocations, from the state store (series, spend ledger), with the status
 * by the precedence of docs/design.md#run-status.
 */
export async function summarize(facts: RunFacts): Promise<RunSummary> {
  const { store, runId, stop } = facts;
  const byReason: Record<string, number> = {};
  const stopped: Record<string, number> = {};
  const add = (counts: Record<string, number>, key: string, n: number) => {
    counts[key] = (counts[key] ?? 0) + n;
  };
  const runStop = runStopReason(stop, facts.budgetReached);
  let completed = 0;
  let failed = 0;
  let reached = 0;
  let skipped = 0;
  for (const { status, reason, n } of await store.seriesEnds(runId)) {
    reached += n;
    // Skipped by the refresh plan: neither complete nor stopped, and no part of the status.
    if (status === 'ended' && reason === SKIPPED) skipped += n;
    else if (status === 'ended' && reason) {
      add(byReason, reason, n);
      if (COMPLETE_REASONS.has(reason as SeriesEndReason)) completed += n;
      else if (reason === 'failed') failed += n;
      else add(stopped, reason, n);
    } else {
      // Stopped with the run, or under way when it stopped.
      add(stopped, status === 'stopped' && reason ? reason : runStop, n);
    }
  }
  // Series the run never reached count as stopped with it.
  if (facts.seriesTotal > reached) add(stopped, runStop, facts.seriesTotal - reached);

  let status: RunStatus;
  let reason: string | undefined;
  if (stop && (stop.reason === 'interrupted' || stop.reason === 'aborted')) status = 'interrupted';
  // A distributed run's worker presumed dead by the others: resumable as after a signal, and said apart (exit 75).
  else if (stop?.reason === 'presumed_dead') {
    status = 'interrupted';
    reason = stop.reason;
  }
  // Every key's allowance is spent for its period: the run goes on in the next (docs/credits.md#allowances).
  else if (stop?.reason === 'allowance') status = 'allowance';
  else if (stop) {
    status = 'stopped';
    reason = stop.reason;
  } else if (byReason.forbidden) {
    status = 'stopped';
    reason = 'forbidden';
  } else if (failed > 0) status = 'failed_series';
  else if (byReason.budget || stopped.budget) status = 'budget';
  else status = 'completed';

  const spend = await store.spendOf(runId);
  const totals = await store.seriesTotals(runId);
  const failedBy = await store.failedKinds(runId);
  const message = stop?.message ?? (reason === 'forbidden' ? 'a 403 stopped every series of an endpoint: check the plan and its endpoints' : undefined);
  return {
    runId,
    pipeline: facts.pipeline,
    status,
    // The status says it all for allowances, as for a budget.
    ...(reason ?? (stop && status !== 'allowance') ? { reason: reason ?? stop?.reason } : {}),
    ...(message ? { message } : {}),
    ...(stop?.resumeAt ? { resumeAt: stop.resumeAt.toISOString() } : {}),
    ...(stop?.allowance ? { allowance: stop.allowance.map((out) => ({ key: out.key, period: out.period, opensAt: Number.isFinite(out.until) ? new Date(out.until).toISOString() : null, timezone: out.timezone })) } : {}),
    requests: { total: spend.requests, byStatus: spend.byStatus },
    retries: spend.retries,
    rateLimitedWaitMs: Math.round(facts.rateLimitedWaitMs),
    credits: { spent: spend.spent, uncertain: spend.uncertain, uncommitted: spend.uncommitted, budget: facts.budget, byEndpoint: spend.byEndpoint },
    pages: { fetched: totals.pages },
    items: { served: totals.served, written: totals.written, duplicates: totals.duplicates, dropped: totals.dropped },
    series: { total: facts.seriesTotal, completed, failed, failedBy, stopped, byReason, ...(facts.refresh ? { skipped } : {}) },
    ...(facts.refresh ? { refresh: { ...facts.refresh, spentPages: totals.pages } } : {}),
    destination: facts.destination,
    outputs: facts.outputs,
    startedAt: facts.startedAt,
    finishedAt: facts.finishedAt,
    durationMs: facts.durationMs,
    ...(facts.keys ? { keys: facts.keys } : {}),
  };
}
