import { z } from 'zod';
import type { Item } from '../client/client.ts';
import { MalformedResponseError } from '../errors/malformed-response-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { ENDPOINT_PATH_HINT, isEndpointPath } from '../client/endpoint-path.ts';
import { characterCount, MAX_QUERY_CHARACTERS } from '../client/search-params.ts';
import type { Series } from '../pipeline/page.ts';
import { toJson } from '../json.ts';
import { defineSource, type Fetched } from './define-source.ts';
import { cursorFrom, custom, type PageRequest, type Paginator, pageNumber, valueAt } from './paginators/index.ts';
import type { Source } from './source.ts';

type Params = Record<string, string | number | boolean>;
type Body = Record<string, unknown>;

/** Given a page's whole body and the request that fetched it, what the next request sends; null: no next page. */
export type NextPage = (body: unknown, request: { page: number; params: Params; body: Body | undefined }) => Record<string, unknown> | null | undefined;

const scalar = z.union([z.string(), z.number(), z.boolean()], { error: 'must be a string, a number or a boolean' });
const paramsSchema = z.record(z.string(), scalar);

/** A parameter value is one field of a query string: no longer than a search query may be (search-params.ts). */
function checkParamLengths(ctx: z.core.ParsePayload<Params | Params[]>): void {
  const sets = Array.isArray(ctx.value) ? ctx.value : [ctx.value];
  sets.forEach((params, i) => {
    for (const [name, value] of Object.entries(params)) {
      if (typeof value !== 'string' || value.length <= MAX_QUERY_CHARACTERS) continue;
      const characters = characterCount(value);
      if (characters <= MAX_QUERY_CHARACTERS) continue;
      ctx.issues.push({
        code: 'custom',
        path: Array.isArray(ctx.value) ? [i, name] : [name],
        input: value,
        message: `is ${characters.toLocaleString('en-US')} characters long; the most is ${MAX_QUERY_CHARACTERS.toLocaleString('en-US')} (one value of a query string)`,
      });
    }
  });
}

const endpointFields = z.strictObject({
    /** A catalog path below the base URL, e.g. `/video/search`. */
    path: z.string().refine(isEndpointPath, { error: ENDPOINT_PATH_HINT }),
    /** Default: GET, or POST when there is a body. */
    method: z.enum(['GET', 'POST']).optional(),
    /** Query-string parameters; a list makes one series per entry (e.g. one per app or per keyword). */
    params: z
      .union([paramsSchema, z.array(paramsSchema).min(1, { error: 'must hold at least one set of parameters' })])
      .check(checkParamLengths)
      .default({}),
    /** A JSON body (the page parameter, or the cursor, then goes into the body). */
    body: z.record(z.string(), z.unknown()).optional(),
    /** The parameter that carries the page number (not sent when pages follow a cursor). */
    pageParam: z.string().min(1).default('page'),
    firstPage: z.int().positive().default(1),
    /** Where the items are in the body, as a dot path (`data`, `results.items`). */
    itemsAt: z.string().min(1).default('data'),
    maxPages: z.int().positive().max(10_000).default(5),
    /** Items a full page holds: a shorter page ends the series (`short`). Unset: only empty pages end it. */
    pageSize: z.int().positive().optional(),
    stopAfterNoNew: z.int().positive().optional(),
    /** Cursor paging, declared: read the body's field `from` (a dot path) and send it as `param`; absent or null ends the series. */
    cursor: z.strictObject({ from: z.string().min(1), param: z.string().min(1) }).optional(),
    /** Cursor paging, in code: what the next request sends, or null at the end. */
    next: z.custom<NextPage>((v) => typeof v === 'function', { error: 'must be a function (body, request) => params | null' }).optional(),
    /** The endpoint's own normalization of an item, before the stages (by default items go on as served). */
    mapItem: z.custom<(item: unknown, series: Series) => Record<string, unknown>>((v) => typeof v === 'function', { error: 'must be a function' }).optional(),
});

export const endpointPagesOptionsSchema = endpointFields.refine((o) => !(o.cursor && o.next), { error: 'give cursor or next, not both' });

/** The same options as JSON can hold them (no functions): `"endpoint": { … }` in a JSON config. */
export const endpointConfigSchema = endpointFields.omit({ next: true, mapItem: true });

export type EndpointPagesOptions = z.input<typeof endpointPagesOptionsSchema>;

/** Parameters that name what a series is about, for the `query` column, first found first. */
const LABELS = ['q', 'query', 'keyword', 'term', 'app_id', 'appId', 'id', 'url'];

/**
 * A source for any other catalog endpoint: each parameter set is a series, paged by page number (or by a cursor),
 * with the same stop rules, scheduler, credit weights and exactly-once guarantees as search.
 */
export function endpointPages(options: EndpointPagesOptions): Source {
  const config = ValidationError.parse(endpointPagesOptionsSchema, options, 'Invalid endpoint source', 'endpoint');
  const paramSets = Array.isArray(config.params) ? config.params : [config.params];
  const method = config.method ?? (config.body ? 'POST' : 'GET');
  const cursorPaged = config.cursor !== undefined || config.next !== undefined;
  const paginatorFor = (params: Params): Paginator => {
    const first = config.firstPage;
    if (config.cursor) return cursorFrom(config.cursor.from, config.cursor.param, { first });
    const next = config.next;
    if (next) return custom((answer) => next(answer.body, { page: answer.request.number, params, body: requestBody(answer.request) }), { first });
    return pageNumber({ param: config.pageParam, first });
  };
  // The page (or the cursor) goes where the parameters go: into the body when there is one.
  const requestBody = (request: PageRequest): Body | undefined => (config.body ? { ...config.body, ...request.params } : undefined);

  // One series per distinct parameter set, by a stable identity.
  const byId = new Map(paramSets.map((params) => [`${config.path}|${toJson(sorted(params))}`, params]));

  function* series(): Generator<Series> {
    for (const [id, params] of byId) {
      const fromBody = config.body ?? {};
      const labelName = LABELS.find((name) => typeof (params[name] ?? fromBody[name]) === 'string' || typeof (params[name] ?? fromBody[name]) === 'number');
      // The `query` column names the series: its main parameter, then the others that tell it apart
      // (`com.example.notes store=ios`), so that rows of different series never look alike.
      const others = Object.entries(sorted(params))
        .filter(([name]) => name !== labelName && !['country', 'lang', 'marketplace'].includes(name))
        .map(([name, value]) => `${name}=${value}`);
      const label = labelName === undefined ? [] : [String(params[labelName] ?? fromBody[labelName])];
      yield {
        id,
        endpoint: config.path,
        query: [...label, ...others].join(' ') || toJson(sorted(params)),
        country: String(params.country ?? fromBody.country ?? params.marketplace ?? fromBody.marketplace ?? ''),
        lang: String(params.lang ?? fromBody.lang ?? ''),
      };
    }
  }

  return defineSource<Item>({
    endpoint: config.path,
    series,
    seriesCount: byId.size,
    paginator: (one) => paginatorFor(byId.get(one.id) as Params),
    maxPages: config.maxPages,
    pageSize: config.pageSize,
    stopAfterNoNew: config.stopAfterNoNew,
    fingerprint: {
      endpoint: config.path,
      method,
      params: paramSets,
      body: config.body ?? null,
      pageParam: cursorPaged ? null : config.pageParam,
      cursor: config.cursor ?? (config.next ? 'function' : null),
      firstPage: config.firstPage,
      maxPages: config.maxPages,
      pageSize: config.pageSize ?? null,
      itemsAt: config.itemsAt,
    },
    async fetch(one, request, { client, signal }): Promise<Fetched<Item>> {
      const params = byId.get(one.id) as Params;
      const body = requestBody(request);
      const query = config.body ? params : { ...params, ...(request.params as Params) };
      const response = await client.request({ method, path: config.path, query, ...(body ? { body } : {}) }, { signal });
      const found = valueAt(response.body, config.itemsAt);
      if (!Array.isArray(found)) {
        throw new MalformedResponseError(`${method} ${config.path} → ${response.status}: no array at "${config.itemsAt}" in the body; it was probably charged`, {
          method,
          path: config.path,
          status: response.status,
          requestId: response.requestId,
        });
      }
      const items = found.map((item) => {
        const object = item !== null && typeof item === 'object' && !Array.isArray(item) ? (item as Record<string, unknown>) : { value: item };
        return config.mapItem ? config.mapItem(object, one) : object;
      });
      // Its headers too: the scheduler paces to rate-limit headers before the server has to answer 429.
      return { items, status: response.status, headers: response.headers, requestId: response.requestId, durationMs: response.durationMs, bytes: response.bytes, body: response.body };
    },
  });
}

function sorted(params: Params): Params {
  return Object.fromEntries(Object.entries(params).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
