import { SEARCH_PATH } from '../client/client.ts';
import type { Pipeline } from '../config/define.ts';
import type { RunHost } from '../host/run-host.ts';
import type { Budget } from '../schedule/budget.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { RunStore } from '../state/interfaces.ts';
import type { KeyShare } from './allowance-shares.ts';
import type { OpenedRun } from './open-run.ts';
import { RefreshFeed } from './refresh-feed.ts';
import { budgetPages, type OpeningPlan, planOpeningRun } from './refresh-plan.ts';

/** Credits a page of the tracked series costs: the search endpoint's weight (tracking is of its series). */
export function pageWeight(pipeline: Pick<Pipeline, 'credits'>): number {
  return pipeline.credits.weights[SEARCH_PATH] ?? 1;
}

/**
 * A new run's refresh plan (`refresh.priority: 'changes'`), under its budget in pages: `budget.maxCredits` ÷ the
 * endpoint's weight, or the spread allowances' shares of this occurrence (allowance-shares.ts) when every key of the
 * run has one, the smaller. Undefined: the pipeline does not plan.
 */
export async function planNewRun(parts: {
  store: Pick<RunStore, 'progress' | 'runs'>;
  pipeline: Pipeline;
  plan: SourcePlan;
  runId: string;
  budget: Budget | null;
  /** The run's keys by label: a share bounds the run only when each of them has one (a key without is not bounded by it). */
  labels: readonly string[];
  shares: () => Promise<ReadonlyMap<string, KeyShare>>;
}): Promise<OpeningPlan | undefined> {
  const { pipeline } = parts;
  if (pipeline.refresh?.priority !== 'changes') return undefined;
  const shares = await parts.shares();
  const caps = parts.labels.length > 0 && parts.labels.every((label) => shares.has(label)) ? parts.labels.map((label) => shares.get(label)?.cap ?? 0) : [];
  const pages = budgetPages(parts.budget?.maxCredits ?? null, caps, pageWeight(pipeline));
  return planOpeningRun({ store: parts.store, pipeline, plan: parts.plan, runId: parts.runId, budget: pages });
}

/** A run's refresh feed, and where it learns what the budget has left (the run's scheduler, once wired). */
export interface RunRefresh {
  feed: RefreshFeed;
  watch(scheduler: Scheduler): void;
}

/**
 * The refresh feed of a new run in this process (refresh-feed.ts); none for a run that does not plan, a resumed one
 * (it keeps the choices recorded) or a distributed run's worker (its queue holds the chosen series: it planned once).
 */
export function refreshFeed(opened: OpenedRun, host: RunHost, pipeline: Pipeline): RunRefresh | undefined {
  const opening = opened.opening;
  if (!opening || host.feed) return undefined;
  let scheduler: Scheduler | undefined;
  const weight = pageWeight(pipeline);
  const feed = new RefreshFeed(opening, {
    pagesLeft() {
      const budget = opening.explanation.budgetPages;
      if (budget === null || scheduler === undefined) return null;
      const credits = scheduler.stats().credits;
      return Math.max(0, budget - Math.ceil((credits.spent + credits.reserved) / (weight > 0 ? weight : 1)));
    },
    stopped: () => scheduler?.stopped !== undefined,
  });
  return {
    feed,
    watch(wired) {
      scheduler = wired;
    },
  };
}
