import type { Client, Item } from '../client/client.ts';
import type { RunContext } from '../pipeline/context.ts';
import type { Page, Series } from '../pipeline/page.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { StopReason } from '../schedule/classify.ts';

/**
 * Why a series ended. The first seven are its own stop rules (docs/design.md#pagination-and-stop-rules), the series is
 * complete: `end` is a cursor-paged endpoint saying there is no next page; `found`, its tracked domains found (depth
 * until found, plus its margin).
 */
export type SeriesEndReason = 'empty' | 'short' | 'max_pages' | 'repeat' | 'no_new' | 'end' | 'found' | 'budget' | 'failed' | 'forbidden';
export const COMPLETE_REASONS: ReadonlySet<SeriesEndReason> = new Set(['empty', 'short', 'max_pages', 'repeat', 'no_new', 'end', 'found']);

/** How a series ended in this invocation; `pages` counts the pages it handed on in this invocation. */
export type SeriesEnd =
  | { reason: SeriesEndReason; pages: number; error?: unknown }
  /** The run stopped (401, 402, quota, stall, a signal) before the series ended: it can be resumed. */
  | { reason: 'stopped'; stop: StopReason; pages: number; error?: unknown }
  /** A distributed run's series another worker took over (this one stalled): it goes on there; nothing is recorded here. */
  | { reason: 'lost'; pages: number };

/** Where an earlier invocation of the same run left a series. */
export type SeriesResume =
  | { done: true }
  | {
      done: false;
      /** The next page to request (undefined: the first). */
      nextPage: number | undefined;
      /** Pages already committed (they count towards maxPages). */
      pages: number;
      /** Digest of the last committed page (the repeat rule). */
      digest: string | undefined;
      /** Cursor-paged sources: what the next request sends. */
      cursor: Record<string, unknown> | undefined;
    };

/** What a source is given to fetch with. */
export interface SourceContext extends RunContext {
  readonly client: Client;
  /**
   * The client of the key the scheduler gave a request (its `send`'s `key`): with a pool of keys, one client per key
   * (docs/pipelines.md#a-pool-of-keys). Absent outside the runner: `client`.
   */
  clientFor?(key: string): Client;
  readonly scheduler: Scheduler;
  /** When resuming a run: where the series stands (undefined: start it from its first page). */
  progress(series: Series): Promise<SeriesResume | undefined>;
  /**
   * Waits for a permit to send a page's request: the run lets no more pages than its concurrency be paid for and not
   * yet committed. Give the release back once the page is committed (`processed`) or the request came to nothing.
   */
  pagePermit(): Promise<() => void>;
  /**
   * Resolves once the page has passed every stage and is committed, with the number of its items that were new
   * after dedupe and, when the page ended its series (the no_new rule), why. Call it before handing the page on.
   */
  processed(page: Page): Promise<{ new: number; end?: SeriesEndReason | undefined }>;
  /**
   * Whether a page of the series may end it once it has passed the stages (depth until found, like `no_new`): the
   * source then waits for each page's commit before asking for the next. Absent: only `no_new` does.
   */
  endsAfterStages?(series: Series): boolean;
  /**
   * A series ended. Ends that come with a page (empty, short, repeat, max_pages, no_new) are carried by the
   * page (`page.meta.end`) and committed with it; this records the others, once the series' pages are committed.
   */
  seriesEnded(series: Series, end: SeriesEnd): Promise<void>;
  /** A distributed run: whether another worker took the series over (a page of it was refused): it is then dropped. */
  lost?(series: Series): boolean;
  /** Why the series fails before its next request, if it does: a page of it could not be stored. */
  refused?(series: Series): Error | undefined;
  /**
   * A worker of a distributed run: the series this worker is to page, taken from the run's queue (the source's own
   * list, `all`, says what each queued id is). Absent: the source pages all its series. `again`, if the source can
   * read its list anew from the start (the same series in the same order), lets a worker keep only a window of what
   * it read over a long run: without it, every series read past stays in memory until the run ends.
   */
  feed?(all: Iterator<Series>, again?: () => Iterator<Series>): SeriesFeed;
}

/** Series handed out one at a time, waiting while others may still come (a distributed run's queue). */
export interface SeriesFeed {
  next(): Promise<IteratorResult<Series, undefined>>;
  /** A series taken but not started (the budget ran out): handed back. */
  unused(series: Series): void;
}

/** What a source will do, known before anything is sent: for `estimate` and the plan's fingerprint. */
export interface SourcePlan {
  endpoint: string;
  seriesCount: number;
  /** Every series stops after this many pages at the most. */
  maxPages: number;
  /** Everything that decides the requests (a change of any of it is a different plan). */
  fingerprint: Record<string, unknown>;
  /** Columns of tags carried into every row (from a query list), for sinks with default columns. */
  tagColumns?: readonly string[];
  /** Things worth telling the user before the run (dropped queries, …). */
  notes?: readonly string[];
  series(): Iterable<Series>;
}

/** Where pages come from; `I` is the type of their items. */
export interface Source<I = Item> {
  plan(): SourcePlan;
  pages(ctx: SourceContext): AsyncIterable<Page<I>>;
}
