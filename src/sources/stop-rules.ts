import type { PageMeta } from '../pipeline/page.ts';

/** What a series' own stop rules are set to. */
export interface StopLimits {
  /** Pages per series at the most, those of earlier invocations included. */
  maxPages: number;
  /** A page with fewer items than this ends the series (`short`); undefined: no such rule. */
  shortBelow: number | undefined;
}

/** A page as served, with what the rules compare it to. */
export interface ServedPage {
  items: number;
  digest: string;
  /** The digest of the page before it in the series (undefined: none). */
  previousDigest: string | undefined;
  /** Whether the paginator found a next page. */
  hasNext: boolean;
  /** Pages of the series fetched so far, this one included. */
  fetched: number;
}

export interface StopRule {
  name: NonNullable<PageMeta['end']>;
  when(page: ServedPage, limits: StopLimits): boolean;
}

/**
 * The stop rules (docs/design.md#pagination-and-stop-rules) that need only the page as served, in the order they are
 * asked: the first that holds ends the series with this page, and its name is the end's reason (an empty last page is
 * `empty`, not `max_pages`). `no_new` needs the page after the stages, so it is decided where the page is committed.
 */
export const STOP_RULES: readonly StopRule[] = [
  { name: 'empty', when: (page) => page.items === 0 },
  { name: 'repeat', when: (page) => page.digest === page.previousDigest },
  { name: 'short', when: (page, limits) => limits.shortBelow !== undefined && page.items < limits.shortBelow },
  { name: 'end', when: (page) => !page.hasNext },
  { name: 'max_pages', when: (page, limits) => page.fetched >= limits.maxPages },
];

/** The first rule that ends the series with this page, if any. */
export function pageEnd(page: ServedPage, limits: StopLimits): StopRule['name'] | undefined {
  return STOP_RULES.find((rule) => rule.when(page, limits))?.name;
}
