import type { SeriesResume } from '../source.ts';

/** Where a series resumes (undefined: from its first page). */
export type Resumed = Exclude<SeriesResume, { done: true }> | undefined;

/** One request of a series, as a paginator asks for it. */
export interface PageRequest {
  /** The page's place in its series: it names the page (`series#number`); each request's is the previous one's + 1. */
  readonly number: number;
  /** What the request sends for this page besides the source's own parameters: `{ page: 3 }`, `{ cursor: 'abc' }`. */
  readonly params: Readonly<Record<string, unknown>>;
  /**
   * What must be kept to ask for this page again after a crash, when `number` alone cannot say it (a server's
   * cursor): committed with the page before it, it comes back to `first` as `resume.cursor`.
   */
  readonly cursor?: Record<string, unknown> | undefined;
}

/** An answered page, as a paginator sees it. */
export interface PageAnswer {
  /** The page's whole body as the source read it (undefined when the source does not give it). */
  readonly body: unknown;
  readonly items: readonly unknown[];
  /** The request that fetched it. */
  readonly request: PageRequest;
}

/**
 * How the pages of a series follow each other (after dlt's paginators): the first request, then each next one from
 * the answer before it. It decides no stop but `end` (next gives null); the stop rules are the paging loop's.
 * A paginator holds no state of its own: one serves every series of a source, several at a time.
 */
export interface Paginator {
  /** The first request of a series, or the one an earlier invocation of the run stopped before. */
  first(resume: Resumed): PageRequest;
  /** The request after `answer`, or null when the answer says there is no next page (the series ends: `end`). */
  next(answer: PageAnswer): PageRequest | null;
}
