import type { Item } from '../client/client.ts';
import type { Stage } from '../pipeline/compose.ts';
import type { Page } from '../pipeline/page.ts';
import { urlKey } from './canonical-url.ts';
import { MAX_KEY_BYTES, storedKey } from '../stored-key.ts';
import type { NormalizedItem } from './normalized-item.ts';

/** Where each field may be found, first match wins: the names real search APIs use (see the corpus). */
export interface FieldAliases {
  url: readonly string[];
  title: readonly string[];
  snippet: readonly string[];
  /** An item's own identity, for the dedupe key of items without a URL (reviews, videos, products). */
  id: readonly string[];
}

export const DEFAULT_ALIASES: FieldAliases = {
  url: ['url', 'link', 'href'],
  title: ['title', 'name'],
  snippet: ['snippet', 'description', 'content', 'text'],
  id: ['id', 'videoId', 'asin'],
};

interface RankState {
  next: number;
  /** dedupe key → rank, for the series' distinct items so far. */
  ranks: Record<string, number>;
}

/**
 * Maps each served item to the normalized row (docs/design.md#the-normalized-item). Nothing is dropped: a missing title
 * is `null`; text is NFC-normalized and trimmed; `raw` keeps the item as received.
 */
export function normalize(options: { aliases?: Partial<FieldAliases> } = {}): Stage<Item, NormalizedItem> {
  const aliases = { ...DEFAULT_ALIASES, ...options.aliases };
  // What decides its rows, for a run's terms.
  const terms = { stage: 'normalize', ...(options.aliases ? { aliases } : {}) };
  const stage: Stage<Item, NormalizedItem> = async function* normalizeStage(pages, ctx) {
    for await (const page of pages) {
      const state = ctx.seriesState<RankState>('normalize', page.series, () => ({ next: 1, ranks: Object.create(null) }));
      // The state notes each change for the page's commit: the counter is changed once a page, not once an item.
      const ranks = { next: state.next, ranks: state.ranks };
      const items = page.items.map((item, index) => normalizeItem(item, index, page, ctx.runId, ranks, aliases));
      if (ranks.next !== state.next) state.next = ranks.next;
      yield { ...page, items };
    }
  };
  return Object.assign(stage, { terms });
}

function normalizeItem(item: Item, index: number, page: Page, runId: string, state: RankState, aliases: FieldAliases): NormalizedItem {
  const url = text(pick(item, aliases.url));
  const id = text(pick(item, aliases.id));
  const parsed = url === null ? null : urlKey(url);
  // Bounded, so that any database can index it (a 6 KB URL keeps a prefix and a digest of the whole).
  // (A parsed URL is ASCII with no NUL — the parser percent-encodes the rest — so only its length can be past the bound.)
  const key = parsed !== null ? (parsed.key.length <= MAX_KEY_BYTES ? parsed.key : storedKey(parsed.key)) : id !== null ? storedKey(`id:${id}`) : null;
  let rank: number;
  if (key === null) {
    rank = state.next++;
  } else {
    rank = state.ranks[key] ?? state.next;
    if (rank === state.next) {
      state.ranks[key] = rank;
      state.next += 1;
    }
  }
  return {
    run_id: runId,
    query: page.series.query,
    country: page.series.country,
    lang: page.series.lang,
    page: page.number,
    position: index + 1,
    rank,
    title: text(pick(item, aliases.title)),
    url,
    domain: parsed === null ? null : parsed.domain,
    snippet: text(pick(item, aliases.snippet)),
    dedupe_key: key,
    fetched_at: page.meta.fetchedAt,
    raw: item,
    // Tags from a query list travel with every row of the series.
    ...page.series.tags,
  };
}

function pick(item: Item, names: readonly string[]): unknown {
  for (const name of names) {
    if (Object.hasOwn(item, name) && item[name] !== undefined && item[name] !== null) return item[name];
  }
  return undefined;
}

/**
 * Text for a column: strings as they are, numbers and booleans as their text (an API that sends a number where a
 * string belongs loses nothing); objects and arrays are not text (they stay in `raw`). NFC, trimmed, with NUL
 * characters removed and lone surrogates replaced, so that every store and tool can take it. Empty is null.
 */
export function text(value: unknown): string | null {
  let out: string;
  if (typeof value === 'string') out = value;
  else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') out = String(value);
  else return null;
  // ASCII without NUL is already well formed and NFC: only the trim applies (most text is; the rest costs twice as much).
  out = PLAIN_ASCII.test(out) ? out.trim() : out.toWellFormed().replaceAll('\0', '').normalize('NFC').trim();
  return out === '' ? null : out;
}

const PLAIN_ASCII = /^[\x01-\x7f]*$/;
