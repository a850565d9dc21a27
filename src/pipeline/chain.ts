import type { SameItemsStage, Stage } from './compose.ts';

/**
 * What a pipeline's chain of stages yields, checked where the pipeline is defined: the item type flows from the
 * source through each stage to the sinks (docs/pipelines.md#composing-in-code). Types only.
 */

/** What `stage` yields when given items of type `I`; `never` when it does not take them. */
type Yields<I, S> =
  S extends SameItemsStage<infer C> ? ([I] extends [C] ? I : never) : S extends Stage<infer A, infer B> ? ([I] extends [A] ? B : never) : never;

/** What a stage takes: its first parameter's items. */
type Takes<S> = S extends SameItemsStage<infer C> ? C : S extends Stage<infer A, unknown> ? A : unknown;

/** The item type after the stages `S`, given items of type `I` in (`never` past a stage that does not take them). */
export type ItemsAfter<I, S extends readonly unknown[]> = number extends S['length']
  ? I extends never ? never : any // an array of stages whose order the compiler does not know: any items
  : S extends readonly [infer First, ...infer Rest]
    ? ItemsAfter<Yields<I, First>, Rest>
    : I;

/** Where a stage does not take the items before it: what the compiler says, naming both types. */
export interface StageMismatch<Given, Taken> {
  readonly 'this stage does not take the items before it': true;
  readonly given: Given;
  readonly takes: Taken;
}

/** The stages as given where each takes what the one before yields; at the first that does not, a `StageMismatch`. */
export type CheckedStages<I, S extends readonly unknown[], Done extends readonly unknown[] = []> = number extends S['length']
  ? S // an array of stages whose order the compiler does not know: checked at run time only
  : S extends readonly [infer First, ...infer Rest]
  ? [Yields<I, First>] extends [never]
    ? readonly [...Done, StageMismatch<I, Takes<First>>, ...Rest]
    : CheckedStages<Yields<I, First>, Rest, readonly [...Done, First]>
  : Done;
