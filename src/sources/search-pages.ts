import { createHash } from 'node:crypto';
import { z } from 'zod';
import { SEARCH_PATH } from '../client/client.ts';
import { checkCountry, checkLang } from '../client/codes.ts';
import { ValidationError } from '../client/errors.ts';
import { toJson } from '../stages/json.ts';
import type { Page, Series } from '../pipeline/page.ts';
import { pageKey } from '../pipeline/page.ts';
import { createChannel } from './channel.ts';
import type { SeriesEnd, SeriesResume, Source, SourceContext, SourcePlan } from './source.ts';

/** Where a series resumes (undefined: from its first page). */
type Resumed = Exclude<SeriesResume, { done: true }> | undefined;

export const DEFAULT_MAX_PAGES = 5;
export const DEFAULT_COUNT = 10;

const codes = z.array(z.string().trim().toLowerCase()).default([]);

export const searchPagesOptionsSchema = z
  .strictObject({
    /** Search queries; blank ones and repeats are dropped (and reported in the plan). */
    queries: z.array(z.string({ error: 'must be a list of query strings' })).min(1, { error: 'must hold at least one query' }),
    /** ISO 3166-1 alpha-2 codes; none: one series per query without a country. */
    countries: codes,
    /** Language codes; none: no `lang` sent. */
    langs: codes,
    /** Pages per series at the most (always bounded). */
    maxPages: z.int().positive().max(1000).default(DEFAULT_MAX_PAGES),
    /** Results per page sent as `count`; `null` sends none (and disables the short-page rule). */
    count: z.int().positive().nullable().default(DEFAULT_COUNT),
    firstPage: z.int().positive().default(1),
    /** Stop a series at a page shorter than `count` (saves a paid request per series; off for engines with variable page sizes). */
    stopOnShortPage: z.boolean().default(true),
    /** Stop a series after this many pages in a row with nothing new after dedupe. */
    stopAfterNoNew: z.int().positive().optional(),
    /** Codes the engine accepts beyond ISO (see the client's options of the same names). */
    extraCountries: codes,
    extraLangs: codes,
  })
  .superRefine((options, ctx) => {
    const allow = { extraCountries: options.extraCountries, extraLangs: options.extraLangs };
    options.countries.forEach((code, i) => {
      const problem = checkCountry(code, allow);
      if (problem) ctx.addIssue({ code: 'custom', path: ['countries', i], message: problem });
    });
    options.langs.forEach((code, i) => {
      const problem = checkLang(code, allow);
      if (problem) ctx.addIssue({ code: 'custom', path: ['langs', i], message: problem });
    });
  });

export type SearchPagesOptions = z.input<typeof searchPagesOptionsSchema>;

/**
 * The search source: queries × countries × langs, each series paged in order from `firstPage` until the first stop
 * rule of DESIGN §3. Parameters are validated here, before any request.
 */
export function searchPages(options: SearchPagesOptions): Source & { readonly dropped: { blank: number; duplicate: number } } {
  const config = ValidationError.parse(searchPagesOptionsSchema, options, 'Invalid search source', 'search');
  const { queries, dropped } = uniqueQueries(config.queries);
  if (queries.length === 0) {
    throw new ValidationError('Invalid search source', [{ path: 'search.queries', message: 'every query is blank' }]);
  }
  const countries = config.countries.length > 0 ? [...new Set(config.countries)] : [''];
  const langs = config.langs.length > 0 ? [...new Set(config.langs)] : [''];

  function* series(): Generator<Series> {
    for (const query of queries) {
      for (const country of countries) {
        for (const lang of langs) {
          yield { id: `search|${query}|${country}|${lang}`, endpoint: SEARCH_PATH, query, country, lang };
        }
      }
    }
  }

  const plan = (): SourcePlan => ({
    endpoint: SEARCH_PATH,
    seriesCount: queries.length * countries.length * langs.length,
    maxPages: config.maxPages,
    fingerprint: { endpoint: SEARCH_PATH, queries, countries, langs, maxPages: config.maxPages, count: config.count, firstPage: config.firstPage },
    series,
  });

  return {
    dropped,
    plan,
    pages: (ctx) => fetchAll(series(), ctx, (one, resume, context, push) => pageSeries(one, resume, context, config, push)),
  };
}

/** Blank queries and repeats go; the first spelling of each query stays. */
function uniqueQueries(raw: readonly string[]) {
  const seen = new Set<string>();
  const queries: string[] = [];
  const dropped = { blank: 0, duplicate: 0 };
  for (const query of raw) {
    const q = query.normalize('NFC').trim();
    if (q === '') dropped.blank += 1;
    else if (seen.has(q)) dropped.duplicate += 1;
    else {
      seen.add(q);
      queries.push(q);
    }
  }
  return { queries, dropped };
}

type Config = z.output<typeof searchPagesOptionsSchema>;

/**
 * Runs series concurrently (a bounded number at a time, so that a million queries are not a million pending
 * promises) and yields their pages as they arrive, through a bounded channel (backpressure).
 */
export async function* fetchAll(
  all: Iterator<Series>,
  ctx: SourceContext,
  run: (series: Series, resume: Resumed, ctx: SourceContext, push: (page: Page) => Promise<void>) => Promise<SeriesEnd>,
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
      const resume = ctx.progress(series);
      // Ended in an earlier invocation of this run: nothing to do.
      if (resume?.done) continue;
      active += 1;
      run(series, resume, ctx, (page) => channel.push(page))
        .then(
          (end) => ctx.seriesEnded(series, end),
          (error: unknown) => {
            // A page could not be handed on (the consumer went away) or the source itself broke.
            failure ??= { error };
            channel.cancel(error);
          },
        )
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

/** Pages one search series in order until a stop rule, the budget, a failure, or the run's stop. */
async function pageSeries(series: Series, resume: Resumed, ctx: SourceContext, config: Config, push: (page: Page) => Promise<void>): Promise<SeriesEnd> {
  let previous = resume?.digest;
  let fetched = resume?.pages ?? 0;
  let pushed = 0;
  for (let number = resume?.nextPage ?? config.firstPage; ; number++) {
    const outcome = await ctx.scheduler.request({ series: series.id, path: SEARCH_PATH }, (signal) =>
      ctx.client.search(
        {
          q: series.query,
          page: number,
          ...(config.count === null ? {} : { count: config.count }),
          ...(series.country ? { country: series.country } : {}),
          ...(series.lang ? { lang: series.lang } : {}),
        },
        { signal },
      ),
    );
    if (!outcome.ok) {
      if (outcome.kind === 'failed') return { reason: 'failed', pages: pushed, error: outcome.error };
      if (outcome.reason === 'budget' || outcome.reason === 'forbidden') return { reason: outcome.reason, pages: pushed, error: outcome.error };
      return { reason: 'stopped', stop: outcome.reason, pages: pushed, error: outcome.error };
    }
    fetched += 1;
    pushed += 1;
    const response = outcome.value;
    const digest = createHash('sha1').update(toJson(response.data)).digest('base64');
    // The rules that need only the page as served, decided now so that the end commits with the page.
    const end =
      response.data.length === 0
        ? 'empty'
        : digest === previous
          ? 'repeat'
          : config.stopOnShortPage && config.count !== null && response.data.length < config.count
            ? 'short'
            : fetched >= config.maxPages
              ? 'max_pages'
              : undefined;
    previous = digest;
    const page: Page = {
      key: pageKey(series, number),
      series,
      number,
      items: response.data,
      meta: {
        status: response.status,
        requestId: response.requestId,
        fetchedAt: new Date().toISOString(),
        latencyMs: Math.round(response.durationMs),
        bytes: response.bytes,
        served: response.data.length,
        digest,
        ...(end ? { end } : {}),
        ...(config.stopAfterNoNew === undefined ? {} : { noNewLimit: config.stopAfterNoNew }),
      },
    };
    // Ask before handing the page on, so that the answer cannot be missed however fast the stages are.
    const afterStages = !end && config.stopAfterNoNew !== undefined ? ctx.processed(page) : undefined;
    // Every paid page goes on to the sinks, the empty and repeated ones too: they are part of the record.
    await push(page);
    if (end) return { reason: end, pages: pushed };
    if (afterStages) {
      const result = await afterStages;
      if (result.end) return { reason: result.end, pages: pushed };
    }
  }
}
