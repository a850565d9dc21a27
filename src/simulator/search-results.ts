import { hash, pick, unit } from './rng.ts';

/**
 * Deterministic search results with the habits of real engines: a finite result set per query, a short last
 * page, items that slide across page boundaries, countries that share most results in a different order,
 * items without titles, field names that differ between engines, URLs with tracking parameters, fragments,
 * odd casing and default ports, and text that is not ASCII or not NFC.
 */

export interface SearchQuery {
  q: string;
  page: number;
  count: number;
  country: string;
  lang: string;
}

/** What one ranking is of: a query in a country and a language. */
export type Series = Pick<SearchQuery, 'q' | 'country' | 'lang'>;

export type Shape = 'serp' | 'bing' | 'brave' | 'tavily';

export interface ResultSettings {
  seed: number;
  resultsPerQuery?: number | undefined;
  pastEnd: 'empty' | 'repeat-last';
  shape: Shape | 'mixed';
  untitledRate: number;
  /** Re-rank every this many milliseconds of wall-clock time (rankings change between runs); 0: never. */
  driftEveryMs: number;
  /** Wall-clock time (ms since the Unix epoch); default the system's. */
  epoch?: (() => number) | undefined;
}

/** A result before it is dressed in one engine's field names. */
export interface Result {
  url: string;
  title: string | undefined;
  snippet: string;
  date: string;
}

const DOMAINS = [
  'en.wikipedia.org',
  'www.reddit.com',
  'www.youtube.com',
  'medium.com',
  'github.com',
  'www.nytimes.com',
  'www.theguardian.com',
  'stackoverflow.com',
  'www.amazon.com',
  'www.bbc.co.uk',
  'news.ycombinator.com',
  'www.quora.com',
  'books.google.com',
  'dev.to',
  'www.forbes.com',
  'www.healthline.com',
  'www.imdb.com',
  'www.tripadvisor.com',
  'www.etsy.com',
  'www.zhihu.com',
];

const WORDS = [
  'guide', 'review', 'best', 'how', 'compare', 'price', 'history', 'news', 'tips', 'list', 'official', 'forum',
  'buy', 'cheap', 'top', 'explained', 'tutorial', 'faq', 'near', 'vs', 'alternatives', 'analysis', 'update',
];

// Titles that exercise Unicode handling: precomposed and decomposed accents, CJK, emoji, right-to-left.
const FLAVOURS = ['Café crème', 'Cafe\u0301 au lait', 'Überblick', '入門ガイド', 'Лучшие', '🔥 Hot', 'دليل', 'São Paulo', 'naïve'];

const cache = new Map<string, Result[]>();
const CACHE_LIMIT = 2000;

/** The items of one page as the engine would serve them (empty past the end). */
export function searchPage(query: SearchQuery, settings: ResultSettings): Record<string, unknown>[] {
  return pageOf(rankedList(query, settings), query, settings, true);
}

/**
 * The items of one page cut from a ranked list, dressed in the query's engine's field names. With `slide`, a page
 * after the first sometimes starts with the previous page's last result, as engines that re-rank between requests do.
 */
export function pageOf(list: readonly Result[], query: SearchQuery, settings: ResultSettings, slide: boolean): Record<string, unknown>[] {
  const { page, count } = query;
  let start = (page - 1) * count;
  if (start >= list.length) {
    if (settings.pastEnd === 'empty' || list.length === 0) return [];
    // The last page again, exactly as it was served.
    return pageOf(list, { ...query, page: Math.ceil(list.length / count) }, settings, slide);
  }
  if (slide && page > 1 && unit(settings.seed, query.q, query.country, query.lang, page, count, 'slide') < 0.25) {
    // Engines re-rank between requests: the last result of the previous page shows up again first.
    start -= 1;
  }
  const shape = settings.shape === 'mixed' ? pick(['serp', 'bing', 'brave', 'tavily'] as const, unit(settings.seed, query.q, 'shape')) : settings.shape;
  return list.slice(start, start + count).map((result, index) => dress(result, shape, index + 1, query));
}

/** A query's whole ranked result list; it drifts with the epoch when `driftEveryMs` is set. */
export function rankedList(query: Series, settings: ResultSettings): Result[] {
  const epoch = settings.driftEveryMs > 0 ? Math.floor((settings.epoch ?? Date.now)() / settings.driftEveryMs) : 0;
  const id = `${settings.seed}\u0001${query.q}\u0001${query.country}\u0001${query.lang}\u0001${settings.resultsPerQuery}\u0001${settings.untitledRate}\u0001${epoch}`;
  const cached = cache.get(id);
  if (cached) return cached;
  const { seed, q, country, lang } = { seed: settings.seed, ...query };
  const total = settings.resultsPerQuery ?? 25 + (hash(seed, q, 'total') % 71);
  const list: Result[] = [];
  for (let i = 0; i < total; i++) {
    // About one result in five is the country's own; the rest are shared with every other country.
    const local = country !== '' && unit(seed, q, country, i, 'local') < 0.2;
    list.push(local ? localResult(seed, q, country, lang, i, settings) : sharedResult(seed, q, lang, i, settings));
  }
  // Countries rank the shared results a little differently.
  for (let i = 0; i + 1 < list.length; i++) {
    if (unit(seed, q, country, i, 'swap', epoch) < 0.15) [list[i], list[i + 1]] = [list[i + 1] as Result, list[i] as Result];
  }
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value as string);
  cache.set(id, list);
  return list;
}

function sharedResult(seed: number, q: string, lang: string, i: number, settings: ResultSettings): Result {
  const domain = pick(DOMAINS, unit(seed, q, i, 'domain'));
  return build(seed, q, lang, i, domain, settings, 'shared');
}

function localResult(seed: number, q: string, country: string, lang: string, i: number, settings: ResultSettings): Result {
  const tld = country === 'gb' ? 'co.uk' : country === 'us' ? 'com' : country;
  const domain = `www.${pick(['shop', 'news', 'guide', 'forum', 'local'], unit(seed, q, country, i, 'ld'))}-${hash(seed, q, country, i) % 97}.${tld}`;
  return build(seed, q, lang, i, domain, settings, country);
}

export function build(seed: number, q: string, lang: string, i: number, domain: string, settings: ResultSettings, scope: string): Result {
  const r = (what: string) => unit(seed, q, scope, i, what);
  const slug = slugify(q) || 'item';
  let url: string;
  if (domain === 'books.google.com') {
    // Same host and path, different ?id=: distinct pages that a careless normalizer would merge.
    url = `https://books.google.com/books?id=${hash(seed, q, scope, i).toString(36)}&pg=PA${1 + (i % 300)}`;
  } else {
    url = `https://${domain}/${slug}/${pick(WORDS, r('w'))}-${i}`;
  }
  const quirk = r('quirk');
  if (quirk < 0.1) url += `${url.includes('?') ? '&' : '?'}utm_source=newsletter&utm_medium=email&utm_campaign=${slug}`;
  else if (quirk < 0.15) url += `${url.includes('?') ? '&' : '?'}srsltid=AfmBOo${hash(seed, i).toString(36)}`;
  else if (quirk < 0.2) url += `#:~:text=${encodeURIComponent(q)}`;
  else if (quirk < 0.25) url = url.replace(`https://${domain}`, `https://${domain.toUpperCase()}`);
  else if (quirk < 0.28) url = url.replace(`https://${domain}`, `https://${domain}:443`);

  const words = `${q} ${pick(WORDS, r('t1'))} ${pick(WORDS, r('t2'))}`;
  const flavour = r('flavour') < 0.12 ? ` — ${pick(FLAVOURS, r('f'))}` : '';
  const padded = r('pad') < 0.05 ? `  ${capitalize(words)}${flavour} ` : `${capitalize(words)}${flavour}`;
  const title = r('untitled') < settings.untitledRate ? undefined : `${padded} | ${siteName(domain)}`;
  const snippet =
    `${capitalize(pick(WORDS, r('s1')))} ${q}: ${pick(WORDS, r('s2'))} and ${pick(WORDS, r('s3'))} ` +
    `for ${lang || 'everyone'} readers. Updated ${1 + (hash(seed, q, i, 'd') % 28)} days ago…`;
  const date = new Date(Date.UTC(2026, hash(seed, q, i, 'm') % 11, 1 + (hash(seed, q, i, 'day') % 28))).toISOString();
  return { url, title, snippet, date };
}

function dress(result: Result, shape: Shape, position: number, query: SearchQuery): Record<string, unknown> {
  const { url, title, snippet, date } = result;
  const host = safeHost(url);
  switch (shape) {
    case 'serp':
      return { position, ...(title === undefined ? {} : { title }), link: url, displayed_link: `${host} › ${query.q.split(' ')[0] ?? ''}`, snippet, date: date.slice(0, 10) };
    case 'bing':
      return {
        id: `https://api.example/v7/#WebPages.${position - 1}`,
        ...(title === undefined ? {} : { name: title }),
        url,
        displayUrl: url.replace(/^https:\/\//, ''),
        snippet,
        dateLastCrawled: date,
        language: query.lang || 'en',
        isFamilyFriendly: true,
      };
    case 'brave':
      return {
        ...(title === undefined ? {} : { title }),
        url,
        description: snippet,
        meta_url: { scheme: 'https', netloc: host, hostname: host, path: safePath(url) },
        family_friendly: true,
        age: date.slice(0, 10),
      };
    case 'tavily':
      return { ...(title === undefined ? {} : { title }), url, content: snippet, score: Math.round((1 - position / 200) * 1e4) / 1e4 };
  }
}

function slugify(text: string): string {
  return text
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 40);
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function siteName(domain: string): string {
  const parts = domain.replace(/^www\./, '').split('.');
  return capitalize(parts[0] ?? domain);
}

function safeHost(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
}

function safePath(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return '';
  }
}
