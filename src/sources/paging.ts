import { createHash } from 'node:crypto';
import type { ResponseMeta } from '../client/client.ts';
import { type Page, pageKey, type Series } from '../pipeline/page.ts';
import type { Outcome } from '../schedule/scheduler.ts';
import { toJson } from '../json.ts';
import { createChannel } from './channel.ts';
import type { PageRequest, Paginator, Resumed } from './paginators/index.ts';
import type { SeriesEnd, SourceContext } from './source.ts';
import { pageEnd, type StopLimits } from './stop-rules.ts';

/** One answered page, as the paging loop takes it (`defineSource` fills in what a source's own `fetch` left out). */
export interface AnsweredPage {
  items: unknown[];
  status: number;
  requestId: string | undefined;
  durationMs: number;
  bytes: number;
  /** The whole body, for paginators that read it (a cursor). */
  body?: unknown;
  /** The answer's headers, for the scheduler to heed (rate-limit headers). */
  headers?: ResponseMeta['headers'];
}

/** What `pageSeries` pages: one series, with its source's paginator, stop limits and request. */
export interface SeriesPaging {
  series: Series;
  resume: Resumed;
  ctx: SourceContext;
  /** Hands a page on (through the bounded channel of `fetchAll`). */
  push: (page: Page) => Promise<void>;
  /** Resolves once few enough answered pages wait for the stages to ask for another (`fetchAll`'s backlog). */
  ready?: () => Promise<void>;
  paginator: Paginator;
  limits: StopLimits;
  /** End the series after this many pages in a row with nothing new after the stages (`no_new`). */
  stopAfterNoNew: number | undefined;
  /** Sends one request for the series (the scheduler calls it, retrying as its table says). */
  /** Fetches a page with the key the scheduler chose (its label: `ctx.clientFor(key)` is its client). */
  fetch: (request: PageRequest, signal: AbortSignal, key: string) => Promise<AnsweredPage>;
}

/**
 * Runs series concurrently (a bounded number at a time, so that a million queries are not a million pending
 * promises) and yields their pages as they arrive, through a bounded channel (backpressure). The series are the
 * source's own, or, for a worker of a distributed run, those the run's queue hands this worker (`ctx.feed`).
 */
export async function* fetchAll(
  all: Iterator<Series>,
  ctx: SourceContext,
  run: (series: Series, resume: Resumed, push: (page: Page) => Promise<void>, ready: () => Promise<void>) => Promise<SeriesEnd>,
  /** The same series anew from the start, if they can be read again (a worker's feed then keeps only a window of them). */
  again?: () => Iterator<Series>,
): AsyncGenerator<Page> {
  const concurrency = ctx.scheduler.stats().concurrency;
  const channel = createChannel<Page>(Math.max(4, concurrency * 2));
  // Answered pages waiting for the stages, at most about this many before a series asks for its next one: when the
  // stages and commits are slower than the network, answers wait as requests not yet sent rather than as parsed pages
  // in memory (up to the concurrency of them). Each page taken lets one more request go, so the requests in flight
  // still cover the latency.
  const backlog = Math.max(4, Math.min(8, concurrency));
  const ready = () => channel.room(backlog);
  const feed = ctx.feed?.(all, again);
  // A worker holds few series at a time, so that the run's series spread over its workers.
  const maxActive = feed ? concurrency + 1 : Math.max(8, concurrency * 4);
  const next = feed ? () => feed.next() : () => all.next();
  let active = 0;
  let exhausted = false;
  let pulling = false;
  let failure: { error: unknown } | undefined;

  const start = (series: Series) => {
    active += 1;
    ctx
      .progress(series)
      // Ended in an earlier invocation of this run: nothing to do.
      .then((resume) => (resume?.done ? undefined : run(series, resume, (page) => channel.push(page), ready)))
      // Recording the end can fail too (a full disk): it then fails the stream like any other error.
      .then((end) => end && ctx.seriesEnded(series, end))
      .catch((error: unknown) => {
        // Progress could not be read, a page could not be handed on (the consumer went away), the source broke, or
        // the end could not be recorded.
        failure ??= { error };
        channel.cancel(error);
      })
      .finally(() => {
        active -= 1;
        void startMore();
      });
  };

  const startMore = async () => {
    // One puller at a time: a feed's `next` may wait (for the run's queue), and series ending meanwhile call again.
    if (pulling) return;
    pulling = true;
    try {
      while (!failure && active < maxActive && !exhausted) {
        const pulled = await next();
        if (pulled.done) {
          exhausted = true;
          break;
        }
        const series = pulled.value;
        // The budget cannot take a single request more of this source: the series left are not started (nor
        // recorded, so that a resume with a larger budget takes them up; a worker hands its queued one back).
        if (!ctx.scheduler.affordable(series.endpoint)) {
          exhausted = true;
          feed?.unused(series);
          break;
        }
        start(series);
      }
    } catch (error) {
      failure ??= { error };
      channel.cancel(error);
    } finally {
      pulling = false;
    }
    if (active === 0 && (exhausted || failure)) channel.close();
  };

  void startMore();
  yield* channel;
  // The channel ends quietly when cancelled: a series that failed outside its requests (its progress unreadable, its
  // end not recorded, a broken source) fails the stream here, or the run would end as if it were done.
  if (failure) throw failure.error;
}

/**
 * Pages one series in order until a stop rule (`STOP_RULES`, then `no_new`: docs/design.md#pagination-and-stop-rules),
 * the budget, a failure or the run's stop. Each request goes through the scheduler under a page permit; the paginator
 * says what it sends.
 */
export async function pageSeries(options: SeriesPaging): Promise<SeriesEnd> {
  const { series, ctx, paginator } = options;
  const state: PagingState = { previous: options.resume?.digest, fetched: options.resume?.pages ?? 0, pushed: 0 };
  let request = paginator.first(options.resume);
  for (;;) {
    await options.ready?.();
    const release = await ctx.pagePermit();
    // A worker waits for its permit until it knows its series are still its own (after a freeze, they may not be).
    if (ctx.lost?.(series)) {
      release();
      return { reason: 'lost', pages: state.pushed };
    }
    const refused = ctx.refused?.(series);
    if (refused) {
      release();
      return { reason: 'failed', pages: state.pushed, error: refused };
    }
    // The page is asked for and handed on by a function of its own, so that nothing of it is left in this loop's frame
    // while the series waits for its next permit: a suspended async function keeps every value its frame held, and each
    // of a run's active series (up to four times its concurrency) held its last answer, parsed, and its page
    // (docs/benchmarks.md#memory).
    const step = await pageOnce(options, request, release, state);
    if ('end' in step) return step.end;
    request = step.next;
  }
}

/** What `pageSeries` carries from one page of a series to the next. */
interface PagingState {
  /** The last page's digest (the `repeat` rule). */
  previous: string | undefined;
  /** Pages fetched in the series, those of earlier invocations included (`maxPages`). */
  fetched: number;
  /** Pages handed on in this invocation. */
  pushed: number;
}

/** One page of the series: its request under the permit `release` lets go, the page handed on; its end or the next request. */
async function pageOnce(options: SeriesPaging, request: PageRequest, release: () => void, state: PagingState): Promise<{ end: SeriesEnd } | { next: PageRequest }> {
  const { series, ctx, push, paginator, limits, stopAfterNoNew } = options;
  let outcome: Outcome<AnsweredPage & { next: PageRequest | null }>;
  try {
    outcome = await ctx.scheduler.request({ series: series.id, path: series.endpoint, page: request.number }, async (signal, key) => {
      const answer = await options.fetch(request, signal, key);
      // Inside the request: a paginator that cannot read the answer fails the series as a malformed answer does.
      return { ...answer, next: following(paginator, answer, request) };
    });
  } catch (error) {
    release();
    throw error;
  }
  const pages = state.pushed;
  if (!outcome.ok) {
    release();
    if (outcome.kind === 'failed') return { end: { reason: 'failed', pages, error: outcome.error } };
    if (outcome.reason === 'budget' || outcome.reason === 'forbidden') return { end: { reason: outcome.reason, pages, error: outcome.error } };
    return { end: { reason: 'stopped', stop: outcome.reason, pages, error: outcome.error } };
  }
  state.fetched += 1;
  state.pushed += 1;
  const answer = outcome.value;
  const digest = createHash('sha1').update(toJson(answer.items)).digest('base64');
  // The rules that need only the page as served, decided now so that the end commits with the page.
  const end = pageEnd({ items: answer.items.length, digest, previousDigest: state.previous, hasNext: answer.next !== null, fetched: state.fetched }, limits);
  state.previous = digest;
  const cursor = answer.next?.cursor;
  const page: Page = {
    key: pageKey(series, request.number),
    series,
    number: request.number,
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
      ...(stopAfterNoNew === undefined ? {} : { noNewLimit: stopAfterNoNew }),
    },
  };
  // Ask before handing the page on, so that the answer cannot be missed however fast the stages are.
  const committed = ctx.processed(page);
  void committed.then(release);
  const afterStages = !end && (stopAfterNoNew !== undefined || ctx.endsAfterStages?.(series) === true) ? committed : undefined;
  // Every paid page goes on to the sinks, the empty and repeated ones too: they are part of the record.
  await push(page);
  if (end) return { end: { reason: end, pages: state.pushed } };
  if (afterStages) {
    const result = await afterStages;
    if (result.end) return { end: { reason: result.end, pages: state.pushed } };
  }
  // No end: the paginator found a next page (else the `end` rule held).
  return { next: answer.next as PageRequest };
}

/** The paginator's next request; its number must follow (page keys and a resume's next page depend on it). */
function following(paginator: Paginator, answer: AnsweredPage, request: PageRequest): PageRequest | null {
  const next = paginator.next({ body: answer.body, items: answer.items, request });
  if (next !== null && next.number !== request.number + 1) {
    throw new Error(`the paginator asked for page ${next.number} after page ${request.number}: each request's number must be the previous one's + 1`);
  }
  return next;
}
