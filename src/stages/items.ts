import { keepsItems, type SameItemsStage, type Stage } from '../pipeline/compose.ts';
import type { RunContext } from '../pipeline/context.ts';
import type { Page } from '../pipeline/page.ts';

/** A stage that maps each item (the page stays, with its provenance). */
export function mapItems<I, O>(map: (item: I, page: Page<I>, ctx: RunContext) => O): Stage<I, O> {
  const stage: Stage<I, O> = async function* mapItemsStage(pages, ctx) {
    for await (const page of pages) yield { ...page, items: page.items.map((item) => map(item, page, ctx)) };
  };
  // For a run's terms: the function by its name (its code cannot be compared).
  return Object.assign(stage, { terms: { stage: 'mapItems', map: map.name || '(anonymous)' } });
}

/** A stage that keeps the items for which `keep` is true (the page itself always goes on, perhaps empty). */
export function filterItems<I>(keep: (item: I, page: Page<I>, ctx: RunContext) => boolean): SameItemsStage<I> {
  const stage: Stage<I, I> = async function* filterItemsStage(pages, ctx) {
    for await (const page of pages) yield { ...page, items: page.items.filter((item) => keep(item, page, ctx)) };
  };
  return keepsItems(Object.assign(stage, { terms: { stage: 'filterItems', keep: keep.name || '(anonymous)' } }));
}

/** Flattens pages into items, for consumers who want one item at a time. */
export async function* items<I>(pages: AsyncIterable<Page<I>>): AsyncGenerator<I> {
  for await (const page of pages) yield* page.items;
}
