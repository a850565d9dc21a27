import { z } from 'zod';

/*
 * What a run's refresh plan says of itself (docs/pipelines.md#the-refresh-planner): recorded with the run's terms as it
 * opens, and in its summary (`refresh`) with the pages it spent. Its own module: the summary's schema (and the
 * notifications' subpath) take it without the planner.
 */

const countsSchema = z.record(z.string(), z.int());

/** What the plan says of itself: in the run's terms, the summary's `refresh`, and what `estimate` prints. */
export const refreshExplanationSchema = z.object({
  priority: z.literal('changes'),
  /** The run's budget in pages (credits ÷ the endpoint's weight, or a spread allowance's share, the smaller); null: no budget, every series fetched. */
  budgetPages: z.int().nullable(),
  /** Pages the series chosen are expected to take (their last fetch's pages; never fetched: maxPages), re-plans included. */
  expectedPages: z.int(),
  /** Pages the run committed (set in the summary; absent in the plan recorded as the run opened). */
  spentPages: z.int().optional(),
  /** Series chosen to be fetched, by reason: never-fetched, overdue, likely-to-move (and `replanned`: chosen as series ended, with what cheaper fetches left). */
  chosen: countsSchema,
  /** Series skipped, by reason: less-likely-to-move, not-yet-fetched (never fetched, and the budget could not reach it), budget-exhausted (overdue, and the budget could not pay: the promise broken). */
  skipped: countsSchema,
  maxAgeRuns: z.int(),
  /** Series left unfetched past maxAgeRuns runs because the budget could not pay for them: 0 keeps the promise (a series never fetched yet is not overdue). */
  promiseBroken: z.int(),
  /** The past runs the histories were read over (at most HISTORY_RUNS). */
  historyRuns: z.int(),
});

export type RefreshExplanation = z.infer<typeof refreshExplanationSchema>;

/** "budget 120 pages; 37 series chosen (30 likely-to-move, 7 overdue); 263 skipped (263 less-likely-to-move); 118 pages expected, 96 spent; maxAgeRuns 7 kept" */
export function describeRefresh(refresh: RefreshExplanation): string {
  const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
  const list = (counts: Record<string, number>) => Object.entries(counts).map(([reason, n]) => `${n} ${reason}`).join(', ');
  const chosen = total(refresh.chosen);
  const skipped = total(refresh.skipped);
  return [
    refresh.budgetPages === null ? 'no budget: every series fetched' : `budget ${refresh.budgetPages} pages`,
    `${chosen} series chosen${chosen > 0 ? ` (${list(refresh.chosen)})` : ''}`,
    `${skipped} skipped${skipped > 0 ? ` (${list(refresh.skipped)})` : ''}`,
    `${refresh.expectedPages} pages expected${refresh.spentPages === undefined ? '' : `, ${refresh.spentPages} spent`}`,
    refresh.promiseBroken > 0 ? `maxAgeRuns ${refresh.maxAgeRuns} broken for ${refresh.promiseBroken} series (the budget could not pay for them)` : `maxAgeRuns ${refresh.maxAgeRuns} kept`,
  ].join('; ');
}

/** "plan: 12 chosen, 28 skipped, 38/40 pages expected, 35 spent" (`runs`' note), '' without a plan. */
export function refreshNote(refresh: Partial<RefreshExplanation> | undefined): string {
  if (!refresh?.chosen || !refresh.skipped) return '';
  const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
  const budget = refresh.budgetPages === null || refresh.budgetPages === undefined ? ' (no budget)' : `/${refresh.budgetPages}`;
  const broken = refresh.promiseBroken ? `, maxAgeRuns broken for ${refresh.promiseBroken}` : '';
  return `plan: ${total(refresh.chosen)} chosen, ${total(refresh.skipped)} skipped, ${refresh.expectedPages}${budget} pages expected${refresh.spentPages === undefined ? '' : `, ${refresh.spentPages} spent`}${broken}`;
}
