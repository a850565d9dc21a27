import type { RunContext } from './context.ts';
import type { Page } from './page.ts';
import type { Item } from '../client/client.ts';
import { StageContractError } from '../errors/stage-contract-error.ts';

/**
 * A stage: a plain async-iterable transform of pages. A user's own stage is an `async function*` with this
 * signature, as first-class as ours. Stages map pages one to one: they may change or empty a page's items, but
 * must yield every page they take, in order, before taking the next.
 */
export type Stage<I = Item, O = I> = (pages: AsyncIterable<Page<I>>, ctx: RunContext) => AsyncIterable<Page<O>>;

/** Any stage, whatever its items: what the runner holds (a pipeline's chain is checked where it is defined, `chain.ts`). */
export type AnyStage = Stage<any, any>;

/** Marks a stage that yields the very items it takes (a filter, dedupe): they keep their type, whatever it is beyond `C`. */
declare const sameItems: unique symbol;

/** A stage that yields the items it takes, of any type that is a `C` (`dedupe`, `filterItems`). */
export type SameItemsStage<C> = Stage<C, C> & { readonly [sameItems]: C };

/** A stage function as a `SameItemsStage`: its items go through unchanged in type. */
export function keepsItems<C>(stage: Stage<C, C>): SameItemsStage<C> {
  return stage as SameItemsStage<C>;
}

/** Chains stages: `pipe(pages, [a, b], ctx)` is `b(a(pages, ctx), ctx)`. */
export function pipe<O = unknown>(pages: AsyncIterable<Page<unknown>>, stages: readonly AnyStage[], ctx: RunContext): AsyncIterable<Page<O>> {
  return stages.reduce<AsyncIterable<Page<unknown>>>((input, stage) => stage(input, ctx), pages) as AsyncIterable<Page<O>>;
}

/**
 * Runs pages through the stages one at a time and checks the contract: each page that comes out is the page
 * that went in, and no stage takes a page before the previous one came out. A page that never reached the
 * sinks would be paid for again on resume, and state a stage changed could not be tied to its page.
 */
export async function* throughStages<O = unknown>(pages: AsyncIterable<Page<unknown>>, stages: readonly AnyStage[], ctx: RunContext): AsyncGenerator<Page<O>> {
  let inside: Page<unknown> | undefined;
  async function* gate(): AsyncGenerator<Page<unknown>> {
    for await (const page of pages) {
      if (inside) {
        throw new StageContractError(
          `a stage took page ${page.key} before yielding page ${inside.key}: stages must yield every page they take, ` +
            'in order, one for one (empty its items instead of dropping it; never merge pages)',
        );
      }
      inside = page;
      yield page;
    }
  }
  for await (const out of pipe<O>(gate(), stages, ctx)) {
    if (!inside) throw new StageContractError(`a stage yielded page ${out.key} that it was not given: stages must not invent pages`);
    if (out.key !== inside.key) {
      throw new StageContractError(`a stage yielded page ${out.key} in place of ${inside.key}: pages must keep their identity and order`);
    }
    inside = undefined;
    yield out;
  }
  if (inside) throw new StageContractError(`a stage dropped page ${inside.key}: every page must reach the sinks (empty its items instead)`);
}
