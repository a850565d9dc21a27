import { hash, pick, unit } from './rng.ts';

/**
 * Items as large as real engines' answers (a serp item about 500-600 bytes of JSON, a Bing one about 900, a Brave one
 * about 1,900): the snippet of two sentences, 150 to 300 characters, and the fields each engine family adds around
 * its core (cached pages, site names, sitelinks, profiles, thumbnails). The simulator's days serve these, so that a
 * month replayed on them weighs what a real month would: the rows stored, the bytes parsed, the memory held.
 */

const PHRASES = [
  'compared side by side with prices, ratings and the opinions of people who bought one',
  'what changed this year, what to look for, and the mistakes most buyers make',
  'a step-by-step walkthrough with photos, measurements and a checklist at the end',
  'answers to the questions readers ask most often, updated as new models appear',
  'independent tests over several weeks, with the results in one table',
  'where to find it near you, opening hours, and what others say about it',
];

/** The item with the fields and the length of a real engine's item of its family (told apart by its own fields). */
export function fullItem(item: Record<string, unknown>, seed: number): Record<string, unknown> {
  const url = String(item.url ?? item.link ?? '');
  const r = (what: string) => unit(seed, url, what);
  const more = ` ${capitalize(pick(PHRASES, r('p1')))}; ${pick(PHRASES, r('p2'))}.`;
  const host = hostOf(url);
  const site = capitalize(host.replace(/^www\./, '').split('.')[0] ?? host);
  if ('link' in item) {
    return {
      ...item,
      snippet: `${String(item.snippet)}${more}`,
      cached_page_link: `https://webcache.example/search?q=cache:${hash(seed, url).toString(36)}:${url}`,
      ...(r('sitelinks') < 0.2 ? { sitelinks: { inline: [{ title: 'Reviews', link: `${url}#reviews` }, { title: 'Prices', link: `${url}#prices` }] } } : {}),
    };
  }
  if ('displayUrl' in item) {
    return {
      ...item,
      snippet: `${String(item.snippet)}${more}`,
      isNavigational: false,
      siteName: site,
      datePublished: String(item.dateLastCrawled ?? '').slice(0, 10),
      cachedPageUrl: `http://cc.bingj.example/cache.aspx?d=${hash(seed, url, 'd')}&w=${hash(seed, url, 'w').toString(36)}`,
      noCache: false,
    };
  }
  if ('meta_url' in item) {
    return {
      ...item,
      description: `${String(item.description)}${more}`,
      type: 'search_result',
      subtype: 'generic',
      is_source_local: false,
      is_source_both: false,
      language: 'en',
      is_live: false,
      profile: { name: site, url, long_name: host, img: `https://imgs.search.example/${hash(seed, host).toString(36)}/favicon.png` },
      ...(r('thumb') < 0.5 ? { thumbnail: { src: `https://imgs.search.example/${hash(seed, url, 't').toString(36)}.jpg`, original: `${url}/cover.jpg`, logo: false } } : {}),
    };
  }
  return { ...item, content: `${String(item.content ?? '')}${more}` };
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
}
