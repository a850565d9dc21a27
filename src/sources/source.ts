import type { Client } from '../client/client.ts';
import type { RunContext } from '../pipeline/context.ts';
import type { Page, Series } from '../pipeline/page.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { StopReason } from '../schedule/classify.ts';

/** Why a series ended. The first six are its own stop rules (DESIGN §3): the series is complete. */
export type SeriesEndReason = 'empty' | 'short' | 'max_pages' | 'repeat' | 'no_new' | 'budget' | 'failed' | 'forbidden';
export const COMPLETE_REASONS: ReadonlySet<SeriesEndReason> = new Set(['empty', 'short', 'max_pages', 'repeat', 'no_new']);

export type SeriesEnd =
  | { reason: SeriesEndReason; pages: number; error?: unknown }
  /** The run stopped (401, 402, quota, stall, a signal) before the series ended: it can be resumed. */
  | { reason: 'stopped'; stop: StopReason; pages: number; error?: unknown };

/** What a source is given to fetch with. */
export interface SourceContext extends RunContext {
  readonly client: Client;
  readonly scheduler: Scheduler;
  /**
   * Resolves once the page has passed every stage, with the number of its items that were new after dedupe.
   * Call it before handing the page on.
   */
  processed(page: Page): Promise<{ new: number }>;
  seriesEnded(series: Series, end: SeriesEnd): void;
}

/** What a source will do, known before anything is sent: for `estimate` and the plan's fingerprint. */
export interface SourcePlan {
  endpoint: string;
  seriesCount: number;
  /** Every series stops after this many pages at the most. */
  maxPages: number;
  /** Everything that decides the requests (a change of any of it is a different plan). */
  fingerprint: Record<string, unknown>;
  series(): Iterable<Series>;
}

export interface Source {
  plan(): SourcePlan;
  pages(ctx: SourceContext): AsyncIterable<Page>;
}
