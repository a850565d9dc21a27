import { createHash } from 'node:crypto';
import type { Page, PageMeta, Series } from '../pipeline/page.ts';
import { pageKey } from '../pipeline/page.ts';
import type { Outcome } from '../schedule/scheduler.ts';
import { toJson } from '../json.ts';
import { createChannel } from './channel.ts';
import type { SeriesEnd, SeriesResume, SourceContext } from './source.ts';

/** Where a series resumes (undefined: from its first page). */
export type Resumed = Exclude<SeriesResume, { done: true }> | undefined;

/** One answered page, as a source hands it to the paging loop. */
export interface Fetched {
  items: unknown[];
  status: number;
  requestId: string | undefined;
  durationMs: number;
  bytes: number;
  /** Cursor-paged endpoints: what to send for the next page; `null` when the server says there is none. */
  next?: Record<string, unknown> | null | undefined;
}

export interface PagingRules {
  firstPage: number;
  maxPages: number;
  /** A page with fewer items than this ends the series (`short`); undefined: no such rule. */
  shortBelow: number | undefined;
  stopAfterNoNew: number | undefined;
}

/**
 * Runs series concurrently (a bounded number at a time, so that a million queries are not a million pending
 * promises) and yields their pages as they arrive, through a bounded channel (backpressure).
 */
export async function* fetchAll(
  all: Iterator<Series>,
  ctx: SourceContext,
  run: (series: Series, resume: Resumed, push: (page: Page) => Promise<void>) => Promise<SeriesEnd>,
): AsyncGenerator<Page> {
  const concurrency = ctx.scheduler.stats().concurrency;
  const channel = createChannel<Page>(Math.max(4, concurrency * 2));
  const maxActive = Math.max(8, concurrency * 4);
  let active = 0;
  let exhausted = false;
  let failure: { error: unknown } | undefined;

  const startMore = () => {
    while (!failure && active < maxActive && !exhausted) {
      const next = all.next();
      if (next.done) {
        exhausted = true;
        break;
      }
      const series = next.value;
      // The budget cannot take a single request more of this source: the series left are not started (nor recorded,
      // so that a resume with a larger budget takes them up).
      if (!ctx.scheduler.affordable(series.endpoint)) {
        exhausted = true;
        break;
      }
      const resume = ctx.progress(series);
      // Ended in an earlier invocation of this run: nothing to do.
      if (resume?.done) continue;
      active += 1;
      run(series, resume, (page) => channel.push(page))
        // Recording the end can fail too (a full disk): it then fails the stream like any other error.
        .then((end) => ctx.seriesEnded(series, end))
        .catch((error: unknown) => {
          // A page could not be handed on (the consumer went away), the source broke, or the end could not be recorded.
          failure ??= { error };
          channel.cancel(error);
        })
        .finally(() => {
          active -= 1;
          startMore();
          if (active === 0 && (exhausted || failure)) channel.close();
        });
    }
    if (active === 0) channel.close();
  };

  startMore();
  yield* channel;
}

/**
 * Pages one series in order until a stop rule of DESIGN §3, the budget, a failure or the run's stop. `fetch` sends
 * one request through the scheduler: page numbers count from `firstPage`; cursor-paged sources also get the cursor
 * the previous page gave.
 */
export async function pageSeries(
  series: Series,
  resume: Resumed,
  ctx: SourceContext,
  push: (page: Page) => Promise<void>,
  rules: PagingRules,
  fetch: (number: number, cursor: Record<string, unknown> | undefined) => Promise<Outcome<Fetched>>,
): Promise<SeriesEnd> {
  let previous = resume?.digest;
  let cursor = resume?.cursor;
  let fetched = resume?.pages ?? 0;
  let pushed = 0;
  for (let number = resume?.nextPage ?? rules.firstPage; ; number++) {
    const release = await ctx.pagePermit();
    let outcome: Outcome<Fetched>;
    try {
      outcome = await fetch(number, cursor);
    } catch (error) {
      release();
      throw error;
    }
    if (!outcome.ok) {
      release();
      if (outcome.kind === 'failed') return { reason: 'failed', pages: pushed, error: outcome.error };
      if (outcome.reason === 'budget' || outcome.reason === 'forbidden') return { reason: outcome.reason, pages: pushed, error: outcome.error };
      return { reason: 'stopped', stop: outcome.reason, pages: pushed, error: outcome.error };
    }
    fetched += 1;
    pushed += 1;
    const answer = outcome.value;
    const digest = createHash('sha1').update(toJson(answer.items)).digest('base64');
    // The rules that need only the page as served, decided now so that the end commits with the page.
    const end: PageMeta['end'] =
      answer.items.length === 0
        ? 'empty'
        : digest === previous
          ? 'repeat'
          : rules.shortBelow !== undefined && answer.items.length < rules.shortBelow
            ? 'short'
            : answer.next === null
              ? 'end'
              : fetched >= rules.maxPages
                ? 'max_pages'
                : undefined;
    previous = digest;
    cursor = answer.next ?? undefined;
    const page: Page = {
      key: pageKey(series, number),
      series,
      number,
      items: answer.items as Page['items'],
      meta: {
        status: answer.status,
        requestId: answer.requestId,
        fetchedAt: new Date().toISOString(),
        latencyMs: Math.round(answer.durationMs),
        bytes: answer.bytes,
        served: answer.items.length,
        digest,
        ...(cursor ? { cursor } : {}),
        ...(end ? { end } : {}),
        ...(rules.stopAfterNoNew === undefined ? {} : { noNewLimit: rules.stopAfterNoNew }),
      },
    };
    // Ask before handing the page on, so that the answer cannot be missed however fast the stages are.
    const committed = ctx.processed(page);
    void committed.then(release);
    const afterStages = !end && rules.stopAfterNoNew !== undefined ? committed : undefined;
    // Every paid page goes on to the sinks, the empty and repeated ones too: they are part of the record.
    await push(page);
    if (end) return { reason: end, pages: pushed };
    if (afterStages) {
      const result = await afterStages;
      if (result.end) return { reason: result.end, pages: pushed };
    }
  }
}
