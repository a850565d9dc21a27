import { COUNTRY_CODES } from '../client/iso-codes.ts';
import type { ResolvedSimulatorOptions } from './options.ts';
import { corpusItem } from './corpus-items.ts';
import { dayPage } from './days.ts';
import { hash, pick, unit } from './rng.ts';
import { searchPage } from './search-results.ts';

export interface EndpointInput {
  query: URLSearchParams;
  /** The parsed JSON body, when the request had one. */
  body: unknown;
  options: ResolvedSimulatorOptions;
  /** The simulated day, when one is set: search answers are that day's ranking. */
  day: number | undefined;
}

export type EndpointOutcome =
  | { ok: true; body: Record<string, unknown> }
  | { ok: false; status: number; body: string | Record<string, unknown> };

export interface Endpoint {
  method: 'GET' | 'POST';
  handle(input: EndpointInput): EndpointOutcome;
}

// Error bodies differ between endpoints, as the contract warns: clients must read them for context.
const jsonError = (message: string): EndpointOutcome => ({ ok: false, status: 400, body: { error: { code: 'invalid_request', message } } });
const flatError = (message: string): EndpointOutcome => ({ ok: false, status: 400, body: { message, status: 400 } });
const textError = (message: string): EndpointOutcome => ({ ok: false, status: 400, body: `Bad Request: ${message}` });
const listError = (field: string, message: string): EndpointOutcome => ({ ok: false, status: 400, body: { errors: [{ field, message }] } });

function positiveInt(value: string | null | undefined, fallback: number): number | null {
  if (value === null || value === undefined) return fallback;
  return /^[1-9]\d{0,8}$/.test(value) ? Number(value) : null;
}

const search: Endpoint = {
  method: 'GET',
  handle({ query, options, day }) {
    const q = query.get('q');
    if (q === null || q.trim() === '') return jsonError('q is required');
    const page = positiveInt(query.get('page'), 1);
    if (page === null) return jsonError('page must be a positive integer');
    const count = positiveInt(query.get('count'), 10);
    if (count === null || count > options.maxCount) return jsonError(`count must be an integer from 1 to ${options.maxCount}`);
    const country = query.get('country') ?? '';
    if (country !== '' && !COUNTRY_CODES.has(country)) return jsonError('country must be a lower-case ISO 3166-1 alpha-2 code');
    const lang = query.get('lang') ?? '';
    if (lang !== '' && !/^[a-z]{2}(?:-[a-z]{4})?(?:-(?:[a-z]{2}|\d{3}))?$/.test(lang)) {
      return jsonError('lang must be a lower-case language code');
    }
    const request = { q, page, count, country, lang };
    const items = day === undefined ? searchPage(request, options) : dayPage(request, options, day);
    const data = options.itemSize === 'real' ? items.map((item) => corpusItem(item, options.seed, day !== undefined)) : items;
    return { ok: true, body: { data } };
  },
};

const video: Endpoint = {
  method: 'GET',
  handle({ query, options }) {
    const q = query.get('q');
    if (!q?.trim()) return flatError('Missing required parameter: q');
    const page = positiveInt(query.get('page'), 1);
    if (page === null) return flatError('page must be a positive integer');
    const total = 30 + (hash(options.seed, q, 'videos') % 31);
    const perPage = 20;
    const data = range((page - 1) * perPage, Math.min(total, page * perPage)).map((i) => {
      const id = hash(options.seed, q, i, 'vid').toString(36).padStart(7, '0').slice(0, 11);
      const untitled = unit(options.seed, q, i, 'vt') < options.untitledRate;
      return {
        videoId: id,
        ...(untitled ? {} : { title: `${q} — part ${i + 1}` }),
        url: `https://video.example/watch?v=${id}`,
        channel: { id: `UC${hash(options.seed, q, i % 7).toString(36)}`, name: `Channel ${i % 7}` },
        views: hash(options.seed, q, i, 'views') % 5_000_000,
        lengthSeconds: 30 + (hash(options.seed, q, i, 'len') % 3600),
        publishedAt: new Date(Date.UTC(2026, i % 11, 1 + (i % 28))).toISOString(),
      };
    });
    return { ok: true, body: { data, page } };
  },
};

const reviews: Endpoint = {
  method: 'GET',
  handle({ query, options }) {
    const app = query.get('app_id');
    if (!app) return textError('app_id is required');
    const store = query.get('store') ?? 'ios';
    if (store !== 'ios' && store !== 'android') return textError('store must be ios or android');
    const cursor = query.get('cursor');
    let offset = 0;
    if (cursor !== null) {
      const decoded = Buffer.from(cursor, 'base64url').toString();
      if (!/^o:\d+$/.test(decoded)) return textError('cursor is invalid');
      offset = Number(decoded.slice(2));
    }
    const total = 40 + (hash(options.seed, app, store, 'reviews') % 81);
    const perPage = 25;
    const end = Math.min(total, offset + perPage);
    const data = range(offset, end).map((i) => ({
      id: `r${hash(options.seed, app, store, i).toString(36)}`,
      rating: 1 + (hash(options.seed, app, i, 'stars') % 5),
      ...(unit(options.seed, app, i, 'rt') < options.untitledRate ? {} : { title: pick(['Great app', 'Crashes a lot', 'Très bien', 'Meh', '最高'], unit(options.seed, app, i)) }),
      text: `Review ${i + 1} of ${app} on ${store}.`,
      author: `user${hash(options.seed, app, i, 'u') % 10_000}`,
      date: new Date(Date.UTC(2026, i % 11, 1 + (i % 28))).toISOString(),
    }));
    return { ok: true, body: { data, next_cursor: end < total ? Buffer.from(`o:${end}`).toString('base64url') : null } };
  },
};

const products: Endpoint = {
  method: 'POST',
  handle({ body, options }) {
    if (typeof body !== 'object' || body === null) return listError('body', 'a JSON object is required');
    const { query: q, page = 1, marketplace = 'us' } = body as { query?: unknown; page?: unknown; marketplace?: unknown };
    if (typeof q !== 'string' || !q.trim()) return listError('query', 'is required');
    if (typeof page !== 'number' || !Number.isInteger(page) || page < 1) return listError('page', 'must be a positive integer');
    if (typeof marketplace !== 'string' || !COUNTRY_CODES.has(marketplace)) return listError('marketplace', 'must be a country code');
    const total = 30 + (hash(options.seed, q, marketplace, 'products') % 51);
    const perPage = 24;
    const data = range((page - 1) * perPage, Math.min(total, page * perPage)).map((i) => {
      const asin = `B0${hash(options.seed, q, i, 'asin').toString(36).toUpperCase().padStart(8, '0').slice(0, 8)}`;
      return {
        asin,
        ...(unit(options.seed, q, i, 'pt') < options.untitledRate ? {} : { title: `${q} model ${i + 1}` }),
        price: { value: Math.round(1000 + (hash(options.seed, q, i, 'price') % 90_000)) / 100, currency: marketplace === 'gb' ? 'GBP' : 'USD' },
        rating: Math.round((1 + unit(options.seed, q, i, 'r') * 4) * 10) / 10,
        url: `https://shop.example/${marketplace}/dp/${asin}`,
      };
    });
    return { ok: true, body: { data, total } };
  },
};

/** The simulated catalog, by path below `/api/v1`. */
export const ENDPOINTS: Readonly<Record<string, Endpoint>> = {
  '/searchengine/search': search,
  '/video/search': video,
  '/appstore/reviews': reviews,
  '/products/search': products,
};

function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let i = from; i < to; i++) out.push(i);
  return out;
}
