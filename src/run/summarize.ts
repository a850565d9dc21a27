import type { Scheduler } from '../schedule/scheduler.ts';
import { COMPLETE_REASONS, type SeriesEnd } from '../sources/source.ts';
import type { RunStatus, RunSummary } from './summary.ts';

export interface RunFacts {
  runId: string;
  pipeline: string;
  seriesTotal: number;
  ends: ReadonlyMap<string, SeriesEnd>;
  scheduler: Scheduler;
  totals: { pages: number; served: number; written: number; duplicates: number };
  startedAt: Date;
  finishedAt: Date;
}

/** The summary of a run from what it did: statuses by the precedence of DESIGN §4. */
export function summarize(facts: RunFacts): RunSummary {
  const { scheduler, ends } = facts;
  const stats = scheduler.stats();
  const stop = scheduler.stopped;
  const byReason: Record<string, number> = {};
  const stopped: Record<string, number> = {};
  let completed = 0;
  let failed = 0;
  const add = (counts: Record<string, number>, key: string, n = 1) => {
    counts[key] = (counts[key] ?? 0) + n;
  };
  for (const end of ends.values()) {
    if (end.reason === 'stopped') {
      add(stopped, end.stop);
      continue;
    }
    add(byReason, end.reason);
    if (COMPLETE_REASONS.has(end.reason)) completed += 1;
    else if (end.reason === 'failed') failed += 1;
    else add(stopped, end.reason);
  }
  // Series the run never reached (it stopped first) count as stopped with the run.
  const unreached = facts.seriesTotal - ends.size;
  if (unreached > 0) add(stopped, stop?.reason ?? 'interrupted', unreached);

  let status: RunStatus;
  let reason: string | undefined;
  if (stop && (stop.reason === 'interrupted' || stop.reason === 'aborted')) status = 'interrupted';
  else if (stop) {
    status = 'stopped';
    reason = stop.reason;
  } else if (byReason.forbidden) {
    status = 'stopped';
    reason = 'forbidden';
  } else if (failed > 0) status = 'failed_series';
  else if (byReason.budget) status = 'budget';
  else status = 'completed';

  const { credits } = stats;
  return {
    runId: facts.runId,
    pipeline: facts.pipeline,
    status,
    ...(reason ? { reason } : stop ? { reason: stop.reason } : {}),
    ...(stop ? { message: stop.message } : reason === 'forbidden' ? { message: 'a 403 stopped every series of an endpoint: check the plan' } : {}),
    ...(stop?.resumeAt ? { resumeAt: stop.resumeAt.toISOString() } : {}),
    requests: { total: stats.requests.total, byStatus: stats.requests.byStatus },
    retries: stats.retries,
    rateLimitedWaitMs: Math.round(stats.rateLimitedWaitMs),
    credits: { spent: credits.spent, uncertain: credits.uncertain, budget: credits.budget, byEndpoint: credits.byEndpoint },
    pages: { fetched: facts.totals.pages },
    items: { served: facts.totals.served, written: facts.totals.written, duplicates: facts.totals.duplicates },
    series: { total: facts.seriesTotal, completed, failed, stopped, byReason },
    startedAt: facts.startedAt.toISOString(),
    finishedAt: facts.finishedAt.toISOString(),
    durationMs: facts.finishedAt.getTime() - facts.startedAt.getTime(),
  };
}
