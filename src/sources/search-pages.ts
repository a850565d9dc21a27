import { z } from 'zod';
import { type Item, SEARCH_PATH } from '../client/client.ts';
import { checkCountry, checkLang } from '../client/codes.ts';
import { ValidationError } from '../errors/validation-error.ts';
import type { Series } from '../pipeline/page.ts';
import { defineSource } from './define-source.ts';
import { pageNumber } from './paginators/index.ts';
import { readQueryList } from './query-list.ts';
import type { Source } from './source.ts';

export const DEFAULT_MAX_PAGES = 5;
export const DEFAULT_COUNT = 10;

const codes = z.array(z.string().trim().toLowerCase()).default([]);

export const searchPagesOptionsSchema = z
  .strictObject({
    /** Search queries; blank ones and repeats are dropped (and reported in the plan). */
    queries: z.array(z.string({ error: 'must be a list of query strings' })).default([]),
    /** A file of queries: one per line, or a CSV with a header whose other columns become tags in every row. */
    queriesFile: z.string().min(1).optional(),
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
    if (options.queries.length === 0 && options.queriesFile === undefined) {
      ctx.addIssue({ code: 'custom', path: ['queries'], message: 'must hold at least one query (or give queriesFile)' });
    }
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
 * rule (docs/design.md#pagination-and-stop-rules). Parameters are validated here, before any request.
 */
export function searchPages(options: SearchPagesOptions): Source & { readonly dropped: { blank: number; duplicate: number } } {
  const config = ValidationError.parse(searchPagesOptionsSchema, options, 'Invalid search source', 'search');
  const { queries: listed, tagColumns, dropped } = readQueryList(config.queries, config.queriesFile);
  if (listed.length === 0) {
    throw new ValidationError('Invalid search source', [{ path: config.queriesFile ? 'search.queriesFile' : 'search.queries', message: 'every query is blank' }]);
  }
  const queries = listed.map((entry) => entry.query);
  const countries = config.countries.length > 0 ? [...new Set(config.countries)] : [''];
  const langs = config.langs.length > 0 ? [...new Set(config.langs)] : [''];
  const allow = { extraCountries: config.extraCountries, extraLangs: config.extraLangs };

  function* series(): Generator<Series> {
    for (const { query, tags } of listed) {
      for (const country of countries) {
        for (const lang of langs) {
          yield { id: `search|${query}|${country}|${lang}`, endpoint: SEARCH_PATH, query, country, lang, ...(tags ? { tags } : {}) };
        }
      }
    }
  }

  const source = defineSource<Item>({
    endpoint: SEARCH_PATH,
    series,
    seriesCount: queries.length * countries.length * langs.length,
    paginator: pageNumber({ first: config.firstPage }),
    maxPages: config.maxPages,
    pageSize: config.stopOnShortPage && config.count !== null ? config.count : undefined,
    stopAfterNoNew: config.stopAfterNoNew,
    fingerprint: { endpoint: SEARCH_PATH, queries, countries, langs, maxPages: config.maxPages, count: config.count, firstPage: config.firstPage },
    tagColumns,
    notes: dropped.blank || dropped.duplicate ? [`queries: ${dropped.duplicate} repeated and ${dropped.blank} blank dropped (never sent twice)`] : [],
    async fetch(one, request, { client, signal }) {
      const response = await client.search(
        {
          q: one.query,
          page: request.number,
          ...(config.count === null ? {} : { count: config.count }),
          ...(one.country ? { country: one.country } : {}),
          ...(one.lang ? { lang: one.lang } : {}),
        },
        // The codes this source allowed beyond ISO are allowed for its requests too: one allow-list, not two.
        { signal, allow },
      );
      return { ...response, items: response.data };
    },
  });
  return { dropped, ...source };
}
