import type { Item } from '../client/client.ts';

/**
 * A series: one query (or parameter set) on one endpoint, in one country and language, paged in order.
 * Absent country and lang are `''`, so that keys and database columns stay NOT NULL.
 */
export interface Series {
  /** Stable identity within a run: endpoint, query, country and lang (and params for other endpoints). */
  id: string;
  endpoint: string;
  query: string;
  country: string;
  lang: string;
  /** Extra columns carried from a query list into every row (issue: queries from files). */
  tags?: Readonly<Record<string, string>>;
}

/** Facts about the request that produced a page. */
export interface PageMeta {
  status: number;
  requestId: string | undefined;
  /** When the answer arrived (ISO 8601, UTC). */
  fetchedAt: string;
  latencyMs: number;
  bytes: number;
  /** Items the server sent, before any stage. */
  served: number;
  /** Set by dedupe: items new to its scope, and duplicates removed. */
  dedupe?: { new: number; duplicates: number };
  /** Set by the source: a digest of the items as served (to tell a repeated page). */
  digest?: string;
  /** Set by the source when this page ends its series by one of its own rules (empty, short, repeat, max_pages, end). */
  end?: 'empty' | 'short' | 'repeat' | 'max_pages' | 'end';
  /** Cursor-paged sources: what the next request sends (committed with the page, so that a resume goes on from it). */
  cursor?: Record<string, unknown>;
  /** Set by the source: end the series after this many pages in a row with nothing new after the stages. */
  noNewLimit?: number;
}

/**
 * The unit that flows through stages: one page of one series, with its items and their provenance. Stages map
 * pages one to one (they may empty a page's items, never drop or merge pages), so that every paid page reaches
 * the sinks and is committed exactly once.
 */
export interface Page<I = Item> {
  /** `${series.id}#${number}`: unique within a run. */
  key: string;
  series: Series;
  /** The page number as requested (1-based). */
  number: number;
  items: I[];
  meta: PageMeta;
}

export function pageKey(series: Series, number: number): string {
  return `${series.id}#${number}`;
}
