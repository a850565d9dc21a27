import { fullItem } from './full-items.ts';
import { hash, pick, unit } from './rng.ts';

/**
 * Items of the size real engines' answers have (`itemSize: 'real'`), measured on public responses of each family:
 * a serp item 450-700 bytes of JSON, a Bing one 550-1,100 (about 850), a Brave one 1,550-2,100 (about 1,900: its
 * images and favicons are proxied URLs of 150-250 characters, its descriptions carry `<strong>` markup), a Tavily one
 * about 560 (a 350-character `content`, `raw_content: null`). A run's memory is mostly the pages it holds, and a page
 * is mostly its items: a benchmark of memory on the short items of the default answers measures a third of the bytes.
 * Built on the days' items (`full-items.ts`), which have every family's fields but not yet all of the real weight.
 */

const SENTENCES = [
  'Readers compare the options on price, durability and how easy each one is to set up at home',
  'The list is checked every month against the shops and the manufacturers’ own pages',
  'Each entry links to the sources it was drawn from, with the date it was last confirmed',
  'What follows is based on hands-on use rather than on the specifications alone',
];

/** The item as large as a real one of its family; `full`: it has the days' fields already (`fullItem`). */
export function corpusItem(item: Record<string, unknown>, seed: number, full = false): Record<string, unknown> {
  const whole = full ? item : fullItem(item, seed);
  const url = String(whole.url ?? whole.link ?? '');
  const r = (what: string) => unit(seed, url, 'corpus', what);
  if ('displayUrl' in whole) {
    // Bing: about a third of its results carry a page image; all carry the date as the page shows it.
    return {
      ...whole,
      datePublishedDisplayText: String(whole.datePublished ?? '').slice(0, 10),
      ...(r('image') < 0.3
        ? { thumbnailUrl: proxied(seed, url, 'tbn', 'bing'), primaryImageOfPage: { thumbnailUrl: proxied(seed, url, 'pri', 'bing'), width: 474, height: 248, imageId: hash(seed, url, 'img').toString(16).toUpperCase() } }
        : {}),
    };
  }
  if ('meta_url' in whole) {
    const meta = whole.meta_url as Record<string, unknown>;
    const profile = whole.profile as Record<string, unknown>;
    const path = String(meta.path ?? '');
    // The site's icon, from the engine's own icon cache, proxied like every image it serves.
    const host = String(meta.hostname ?? '');
    const icons = Array.from({ length: 8 }, (_, i) => hash(seed, host, 'icon', i).toString(16).padStart(8, '0')).join('');
    const favicon = proxied(seed, `http://favicons.search.example/icons/${icons}/${host}/`, 'fav', 'brave');
    return {
      ...whole,
      description: strong(String(whole.description), r('strong')),
      page_age: `${String(whole.age ?? '2026-01-01')}T00:00:00`,
      profile: { ...profile, img: favicon },
      meta_url: { ...meta, favicon, path: `› ${path.split('/').filter(Boolean).join(' › ')}` },
      thumbnail: { src: proxied(seed, url, 'thumb', 'brave'), original: `${url}/cover.jpg`, logo: false },
    };
  }
  if ('score' in whole) {
    // Tavily: a longer extract of the page, and the page's text when asked for (null otherwise).
    return { ...whole, content: `${String(whole.content)} ${pick(SENTENCES, r('c1'))}. ${pick(SENTENCES, r('c2'))}.`, raw_content: null };
  }
  return whole;
}

/** An image as engines proxy it: a fixed-size signature, the resize options, then the source URL base64url-encoded in chunks. */
function proxied(seed: number, source: string, what: string, engine: string): string {
  const signature = Array.from({ length: 7 }, (_, i) => hash(seed, source, what, i).toString(36).padStart(7, '0')).join('').slice(0, 43);
  const encoded = Buffer.from(what === 'fav' ? source : `${source}/${what}.png`).toString('base64url');
  const chunks = encoded.match(/.{1,8}/g) ?? [];
  return `https://imgs.search.${engine}.example/${signature}/rs:fit:200:200:1:0/g:ce/${chunks.join('/')}`;
}

/** The query's words in bold, as Brave marks them in its descriptions: every word of the first few. */
function strong(text: string, u: number): string {
  const words = text.split(' ');
  const bold = 3 + Math.floor(u * 5);
  return words.map((word, i) => (i < bold && word.length > 2 ? `<strong>${word}</strong>` : word)).join(' ');
}
