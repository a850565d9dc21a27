import { z } from 'zod';
import type { Client } from '../client/client.ts';
import { ENDPOINT_PATH_HINT, isEndpointPath } from '../client/endpoint-path.ts';
import { ValidationError } from '../errors/validation-error.ts';
import type { Page, Series } from '../pipeline/page.ts';
import { storedKey } from '../stored-key.ts';
import { toJson } from '../json.ts';
import type { ResponseMeta } from '../client/client.ts';
import { type AnsweredPage, fetchAll, pageSeries } from './paging.ts';
import type { PageRequest, Paginator } from './paginators/index.ts';
import type { Source, SourcePlan } from './source.ts';
import { tagColumnsSchema } from './tag-columns.ts';

/**
 * A series as a source of your own gives it: what its requests ask for. The endpoint is the source's unless given, and
 * the id, by which a resume finds the series' progress, is made from the endpoint, query, country and lang unless given.
 */
export interface SeriesInput {
  id?: string;
  endpoint?: string;
  query: string;
  country?: string;
  lang?: string;
  /** Extra columns carried into every row (see `tagColumns`). */
  tags?: Readonly<Record<string, string>>;
}

/**
 * One answered page, as a source's own `fetch` gives it: its items, and what is known of the answer. A client's
 * response spread into it (`{ ...response, items: response.body.data }`) has all of it; left out, the status is 200,
 * the time is the fetch's own and the size 0.
 */
export interface Fetched<I = unknown> {
  items: I[];
  status?: number;
  requestId?: string | undefined;
  durationMs?: number;
  bytes?: number;
  /** The whole body, for paginators that read it (a cursor). */
  body?: unknown;
  /** The answer's headers, for the scheduler to heed (rate-limit headers). */
  headers?: ResponseMeta['headers'];
}

/** What a source of your own decides: its series, how their pages follow each other, and how one is fetched; `I` its items. */
export interface SourceSpec<I = unknown> {
  /** The catalog path its requests go to (credit weights, the 403 rule and the plan go by it); every series' `endpoint`. */
  endpoint: string;
  /**
   * Its series in order (an id given must be stable across invocations: a resume finds a series' progress by it).
   * Called for the plan and again for the run: a generator over a long list is fine.
   */
  series(): Iterable<SeriesInput>;
  /** How many series there are (default: counted by going through `series()`). */
  seriesCount?: number;
  /** How a series' pages follow each other (`pageNumber()`, `cursorFrom(…)`, `custom(…)`), or one per series. */
  paginator: Paginator | ((series: Series) => Paginator);
  /** Pages per series at the most (the `max_pages` rule; always bounded). */
  maxPages: number;
  /** Items a full page holds: a shorter page ends its series (`short`). Unset: only empty pages end it. */
  pageSize?: number | undefined;
  /** End a series after this many pages in a row with nothing new after the stages (`no_new`). */
  stopAfterNoNew?: number | undefined;
  /**
   * Everything that decides the requests, for the run's plan: a resume with a different plan is refused. Default:
   * the endpoint, the series' ids, maxPages and pageSize; give your own when other settings shape the requests.
   */
  fingerprint?: Record<string, unknown>;
  /**
   * Columns of tags carried into every row (from `series.tags`), for sinks with default columns: column names (letters,
   * digits and _), each once, none a normalized item's column.
   */
  tagColumns?: readonly string[];
  /** Things worth telling the user before the run. */
  notes?: readonly string[];
  /**
   * Sends one request for `series` (the scheduler calls it under the run's rate, budget and retries: throw the
   * client's errors as they come) and gives its items. Add `request.params` to what the request sends.
   */
  fetch(series: Series, request: PageRequest, io: { client: Client; signal: AbortSignal }): Promise<Fetched<I>>;
}

/**
 * A source from what it must decide, with the plumbing provided: series run side by side under the scheduler and
 * the page permits, each paged until the stop rules (empty, repeat, short, end, max_pages, no_new), the budget, a
 * failure or the run's stop; pages are committed exactly once and a resumed run goes on from where each series was.
 */
export function defineSource<I>(spec: SourceSpec<I>): Source<I> {
  ValidationError.parse(specSchema, spec, 'Invalid source', 'source');
  const limits = { maxPages: spec.maxPages, shortBelow: spec.pageSize };
  const paginatorFor = typeof spec.paginator === 'function' ? spec.paginator : () => spec.paginator as Paginator;

  // The run knows each series by an id it can store and index (a long query, NUL in a parameter: `storedKey`); the
  // source's own functions get the series as the source made it.
  const own = new WeakMap<Series, Series>();
  function* runSeries(): Generator<Series> {
    for (const given of spec.series()) {
      const series = seriesOf(given, spec.endpoint);
      const id = storedKey(series.id);
      if (id === series.id) yield series;
      else {
        const stored = { ...series, id };
        own.set(stored, series);
        yield stored;
      }
    }
  }
  const ownOf = (series: Series) => own.get(series) ?? series;

  const plan = (): SourcePlan => ({
    endpoint: spec.endpoint,
    seriesCount: spec.seriesCount ?? [...spec.series()].length,
    maxPages: spec.maxPages,
    fingerprint: spec.fingerprint ?? {
      endpoint: spec.endpoint,
      series: Array.from(spec.series(), (series) => seriesOf(series, spec.endpoint).id),
      maxPages: spec.maxPages,
      pageSize: spec.pageSize ?? null,
    },
    ...(spec.tagColumns ? { tagColumns: spec.tagColumns } : {}),
    ...(spec.notes ? { notes: spec.notes } : {}),
    series: runSeries,
  });

  return {
    plan,
    // The paging loop carries items as it got them: those of `spec.fetch`, of type I.
    pages: (ctx) =>
      fetchAll(runSeries(), ctx, (series, resume, push, ready) =>
        pageSeries({
          series,
          resume,
          ctx,
          push,
          ready,
          paginator: paginatorFor(ownOf(series)),
          limits,
          stopAfterNoNew: spec.stopAfterNoNew,
          fetch: (request, signal, key) => answered(() => spec.fetch(ownOf(series), request, { client: ctx.clientFor?.(key) ?? ctx.client, signal })),
        }),
        // `series()` is called for the plan and again for the run (SourceSpec): it can be read once more.
        runSeries,
      ) as AsyncIterable<Page<I>>,
  };
}

/** A series with its endpoint and id filled in (the id from its parameters, as JSON: no two series share one). */
function seriesOf(given: SeriesInput, endpoint: string): Series {
  const series = { endpoint, country: '', lang: '', ...given };
  return { ...series, id: given.id ?? toJson([series.endpoint, series.query, series.country, series.lang]) };
}

/** A source's own answer, with what it left out filled in: status 200, the fetch's own time, size 0. */
async function answered<I>(fetch: () => Promise<Fetched<I>>): Promise<AnsweredPage> {
  const started = performance.now();
  const page = await fetch();
  return { status: 200, requestId: undefined, bytes: 0, ...page, durationMs: page.durationMs ?? performance.now() - started };
}

const fn = (what: string) => z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', { error: `must be a function ${what}` });
const paginatorSchema = z.union([fn('(series) => paginator'), z.looseObject({ first: fn('(resume) => request'), next: fn('(answer) => request | null') })], {
  error: 'must be a paginator such as pageNumber(), cursorFrom(from, param) or custom(next), or a function (series) => paginator',
});

/** The spec's shape, checked before anything is sent (a user's source is input like any other). */
const specSchema = z.looseObject({
  endpoint: z.string().refine(isEndpointPath, { error: ENDPOINT_PATH_HINT }),
  series: fn('() => iterable of series'),
  seriesCount: z.int().nonnegative().optional(),
  paginator: paginatorSchema,
  maxPages: z.int().positive().max(10_000),
  pageSize: z.int().positive().optional(),
  stopAfterNoNew: z.int().positive().optional(),
  fingerprint: z.record(z.string(), z.unknown()).optional(),
  tagColumns: tagColumnsSchema.optional(),
  fetch: fn('(series, request, { client, signal }) => Promise<answer>'),
});
