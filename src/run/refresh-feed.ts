import type { Series } from '../pipeline/page.ts';
import { planRefresh } from '../refresh/plan.ts';
import type { SeriesFeed } from '../sources/source.ts';
import type { OpeningPlan } from './refresh-plan.ts';
import type { RefreshExplanation } from './refresh-summary.ts';

/** What the feed asks of the run: the pages its budget has left now (null: no budget), and whether it stopped. */
export interface RefreshRunState {
  pagesLeft(): number | null;
  stopped(): boolean;
}

/**
 * A run's series in the order its refresh plan pays for them, re-planned as they end (docs/design.md#the-planner-in-runs):
 * the chosen series first, in the plan's order; once every series handed out has ended, the planner is asked again
 * with the pages the budget has left (fetches cheaper than expected leave some) over the series still skipped, and
 * those it chooses are handed out in turn, until it chooses none. A series skipped at the end stays recorded
 * `skipped`; one chosen again is fetched, and its first page's commit replaces that row.
 *
 * Only in this process: a distributed run plans once, in its planning process (its skipped series never enter the
 * queue), and a resumed run keeps the choices its store recorded.
 */
export class RefreshFeed {
  readonly #opening: OpeningPlan;
  readonly #state: RefreshRunState;
  /** Series the plan skips now. */
  readonly #skipped: Set<string>;
  readonly #replanned: string[] = [];
  #expected: number;
  #active = 0;
  #idle: (() => void) | undefined;

  constructor(opening: OpeningPlan, state: RefreshRunState) {
    this.#opening = opening;
    this.#state = state;
    this.#skipped = new Set(opening.plan.skip);
    this.#expected = opening.plan.pages;
  }

  /** Whether the series is skipped (now): its source is told it is done. */
  skips(seriesId: string): boolean {
    return this.#skipped.has(seriesId);
  }

  /** A series handed out has ended (or was found done). */
  ended(): void {
    this.#active = Math.max(0, this.#active - 1);
    if (this.#active === 0) this.#idle?.();
  }

  /** The plan as it stands: the opening's, with what re-planning chose. */
  explanation(): RefreshExplanation {
    const base = this.#opening.explanation;
    if (this.#replanned.length === 0) return base;
    const skipped: Record<string, number> = {};
    for (const choice of this.#opening.plan.series) if (this.#skipped.has(choice.id)) skipped[choice.reason] = (skipped[choice.reason] ?? 0) + 1;
    const promiseBroken = skipped['budget-exhausted'] ?? 0;
    return { ...base, expectedPages: this.#expected, chosen: { ...base.chosen, replanned: this.#replanned.length }, skipped, promiseBroken };
  }

  /** The feed a source pages (`ctx.feed`): its own series, in the plan's order. */
  feed(all: Iterator<Series>): SeriesFeed {
    const byId = new Map<string, Series>();
    for (let next = all.next(); !next.done; next = all.next()) byId.set(next.value.id, next.value);
    // Series the plan never saw (none, unless a source's list changed under it) are fetched, as without a plan.
    const queue = [...this.#opening.plan.fetch, ...[...byId.keys()].filter((id) => !this.#opening.planned.has(id))].filter((id) => byId.has(id));
    return {
      next: async () => {
        for (;;) {
          const id = queue.shift();
          if (id !== undefined) {
            this.#active += 1;
            return { done: false, value: byId.get(id) as Series };
          }
          if (this.#active > 0) await new Promise<void>((resolve) => (this.#idle = resolve));
          const chosen = this.#replan();
          if (chosen.length === 0) return { done: true, value: undefined };
          queue.push(...chosen.filter((id) => byId.has(id)));
        }
      },
      unused: () => this.ended(),
    };
  }

  /** The series still skipped that the pages left pay for, in the planner's order (none once the run stopped). */
  #replan(): string[] {
    const left = this.#state.pagesLeft();
    if (this.#state.stopped() || left === null || left < 1 || this.#skipped.size === 0) return [];
    const series = [...this.#skipped].map((id) => this.#opening.planned.get(id)).filter((s) => s !== undefined);
    const plan = planRefresh({ series, budget: { pages: left }, maxAgeRuns: this.#opening.plan.maxAgeRuns, run: this.#opening.plan.run, prior: this.#opening.prior });
    for (const id of plan.fetch) this.#skipped.delete(id);
    this.#replanned.push(...plan.fetch);
    this.#expected += plan.pages;
    return plan.fetch;
  }
}
