import type { Series } from '../pipeline/page.ts';
import { NOT_REACHED, type SeriesOutcome } from '../sinks/series-outcomes.ts';
import type { Sink } from '../sinks/sink.ts';
import { COMPLETE_REASONS, type SeriesEndReason, type SourcePlan } from '../sources/source.ts';
import type { SeriesStatus, StateStore } from '../state/interfaces.ts';
import { forEachSlice } from './plan-slices.ts';

/**
 * Records how each series of the plan ended in this run, as the state store has it now, beside the rows of every sink
 * that keeps outcomes (`Sink.outcomes`): the views read them to tell a series that completed from one that failed, ran
 * out of budget, was stopped or never reached (docs/analytics.md#failed-and-unreached-series). The state store may be
 * another database than the rows, so they are copied there; each invocation of the run records them again, so that
 * what a resume completes replaces what an earlier invocation left. A results table writes what changed: a series not
 * reached is a row only where its last row said otherwise, so that a plan of a million series mostly not reached is
 * not a million rows at each close (sinks/statements.ts).
 *
 * Where each series stands is read in a few statements when the run reached at most `held` series (a fleet's run of a
 * large plan under a budget): the reached ones whole, `PAGE` to a statement; else a slice of the plan at a time.
 *
 * `runStop` names why series left under way or never reached did not end (`runStopReason`).
 */
export async function recordOutcomes(parts: { store: StateStore; plan: SourcePlan; runId: string; sinks: readonly Sink<unknown>[]; runStop: string; held?: number }): Promise<void> {
  const { store, plan, runId, runStop } = parts;
  const keeping = parts.sinks.filter((sink) => sink.outcomes !== undefined);
  if (keeping.length === 0) return;
  const reached = await reachedUpTo(store, runId, parts.held ?? HELD);
  await forEachSlice(plan, async (slice) => {
    const statuses = reached ?? new Map((await store.seriesStatuses(runId, slice.map((series) => series.id))).map((s) => [s.seriesId, s]));
    const outcomes = byRows(slice.map((series) => outcomeOf(series, statuses.get(series.id), runStop)));
    for (const sink of keeping) await sink.outcomes?.(runId, outcomes);
  });
}

/** The most series whose statuses a close holds at once (about 100 bytes each), and how many it reads to a statement. */
const HELD = 50_000;
const PAGE = 5_000;

/** Where each series the run reached stands, by its id; undefined when it reached more than `held`. */
async function reachedUpTo(store: StateStore, runId: string, held: number): Promise<Map<string, SeriesStatus> | undefined> {
  const reached = new Map<string, SeriesStatus>();
  for (let after = ''; ; ) {
    const page = await store.reachedStatuses(runId, after, Math.min(PAGE, held + 1));
    for (const status of page) reached.set(status.seriesId, status);
    if (reached.size > held) return undefined;
    const last = page.at(-1);
    if (last === undefined || page.length < Math.min(PAGE, held + 1)) return reached;
    after = last.seriesId;
  }
}

/** A series' outcome from where the store has it: complete when a stop rule ended it; else why it did not end. */
export function outcomeOf(series: Series, status: SeriesStatus | undefined, runStop: string): SeriesOutcome {
  const { query, country, lang } = series;
  if (status === undefined) return { query, country, lang, complete: false, reason: NOT_REACHED };
  const reason = status.reason as SeriesEndReason | null;
  if (status.status === 'ended' && reason !== null && COMPLETE_REASONS.has(reason)) return { query, country, lang, complete: true, reason };
  // Ended by the budget, a failure or a 403; stopped with the run; or still under way when this invocation stopped.
  return { query, country, lang, complete: false, reason: status.status === 'active' ? runStop : (status.reason ?? runStop) };
}

/**
 * One outcome per (query, country, lang), the key the rows carry: series of two sources alike in all three (another
 * endpoint) are one there, complete only if each of them is.
 */
function byRows(outcomes: readonly SeriesOutcome[]): SeriesOutcome[] {
  const byKey = new Map<string, SeriesOutcome>();
  for (const outcome of outcomes) {
    const key = JSON.stringify([outcome.query, outcome.country, outcome.lang]);
    const before = byKey.get(key);
    if (before === undefined || (before.complete && !outcome.complete)) byKey.set(key, outcome);
  }
  return [...byKey.values()];
}
