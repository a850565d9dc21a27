// Types that flow (issue 30, §1): a pipeline's item type goes from its source through each stage to every sink, and a
// mismatch is a compile error. `npm run typecheck` (in CI) checks the lines below: each `@ts-expect-error` must fail to
// compile, and its neighbour must compile. The test itself only checks what the definitions give at run time.
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  dedupe,
  definePipeline,
  defineSink,
  defineSource,
  filterItems,
  type Item,
  mapItems,
  normalize,
  paginators,
  type NormalizedItem,
  type Page,
  type PageStream,
  searchPages,
  type Source,
  stream,
  toCsv,
  toJsonl,
  toSqlite,
} from '../../src/index.ts';

const source = () => searchPages({ queries: ['espresso'] });
/** A sink of the user's own, written for normalized items. */
const titles = () => defineSink<NormalizedItem>({ kind: 'titles', write: (page) => void page.items.map((item) => item.title) });
/** A stage of the user's own: normalized items in, something else out. */
const shortened = mapItems((item: NormalizedItem) => ({ title: item.title?.slice(0, 20) ?? null, url: item.url }));

describe('types that flow from the source through the stages to the sinks', () => {
  it('a sink for normalized items needs normalize() before it', () => {
    // @ts-expect-error a sink written for NormalizedItem, after raw items (no normalize()): Sink<NormalizedItem> is not Sink<Item>
    definePipeline({ name: 'raw-into-titles', source: source(), sinks: [titles()] });
    const fine = definePipeline({ name: 'titles', source: source(), stages: [normalize()], sinks: [titles()] });
    expect(fine.sinks).toHaveLength(1);
  });

  it("the built-in table and file sinks take normalized items with their default columns, and any record with columns of one's own", () => {
    // @ts-expect-error toSqlite's default columns are the normalized item's: raw items do not have them
    definePipeline({ name: 'raw-into-sqlite', source: source(), sinks: [toSqlite({ path: 'x.sqlite' })] });
    // @ts-expect-error so are toCsv's
    definePipeline({ name: 'raw-into-csv', source: source(), sinks: [toCsv({ path: 'x.csv' })] });
    definePipeline({ name: 'raw-by-columns', source: source(), sinks: [toSqlite({ path: 'x.sqlite', columns: ['title'] }), toCsv({ path: 'x.csv', columns: ['url'] }), toJsonl({ path: 'x.jsonl' })] });
    definePipeline({ name: 'normalized', source: source(), stages: [normalize(), dedupe()], sinks: [toSqlite({ path: 'x.sqlite' }), toCsv({ path: 'x.csv' })] });
  });

  it('a stage must take what the stage before it yields', () => {
    // @ts-expect-error shortened takes NormalizedItem, and is given the source's raw items (normalize() comes after it)
    definePipeline({ name: 'wrong-order', source: source(), stages: [shortened, normalize()], sinks: [toJsonl({ path: 'x.jsonl' })] });
    definePipeline({ name: 'right-order', source: source(), stages: [normalize(), shortened], sinks: [toJsonl({ path: 'x.jsonl' })] });
  });

  it('stages that keep the items (dedupe, filterItems) keep their type, whatever it is', () => {
    const keep = filterItems((item: { title: string | null }) => item.title !== null);
    // After mapItems the items are { title, url }: a sink for them compiles, one for NormalizedItem does not.
    const forShort = defineSink<{ title: string | null; url: string | null }>({ kind: 'short', write: () => undefined });
    definePipeline({ name: 'short', source: source(), stages: [normalize(), shortened, dedupe(), keep], sinks: [forShort] });
    // @ts-expect-error the items are no longer NormalizedItem after shortened, dedupe() and the filter do not change that
    definePipeline({ name: 'short-into-titles', source: source(), stages: [normalize(), shortened, dedupe(), keep], sinks: [titles()] });
  });

  it('stream() yields pages of what the last stage yields, with no annotation', () => {
    const normalized = stream({ name: 'typed-stream', source: source(), stages: [normalize()], sinks: [] });
    expectTypeOf(normalized).toEqualTypeOf<PageStream<NormalizedItem>>();
    const raw = stream({ name: 'raw-stream', source: source(), sinks: [] });
    expectTypeOf(raw).toEqualTypeOf<PageStream<Item>>();
    const pipeline = definePipeline({ name: 'defined', source: source(), stages: [normalize(), shortened], sinks: [toJsonl({ path: 'x.jsonl' })] });
    expectTypeOf(stream(pipeline)).toEqualTypeOf<PageStream<{ title: string | null; url: string | null }>>();
    expectTypeOf<Page<NormalizedItem>['items'][number]['title']>().toEqualTypeOf<string | null>();
  });

  it('raw is the item as served, a parsed value: its fields are read without JSON.parse', () => {
    const rawTitles = mapItems((item: NormalizedItem) => item.raw.headline ?? item.title);
    // @ts-expect-error raw is no longer JSON text: JSON.parse takes a string
    mapItems((item: NormalizedItem) => JSON.parse(item.raw));
    expectTypeOf<NormalizedItem['raw']>().toEqualTypeOf<Item>();
    expect(typeof rawTitles).toBe('function');
  });

  it('defineSource infers its items from fetch; the endpoint is said once, and series ids are made from their parameters', () => {
    const reviews = defineSource({
      endpoint: '/appstore/reviews',
      series: () => [{ query: 'com.example.notes' }, { query: 'com.example.maps', country: 'us' }],
      paginator: paginators.pageNumber(),
      maxPages: 2,
      // No status, time or size: a fetch that builds its answer itself gives only its items.
      fetch: async (series) => ({ items: [{ app: series.query, stars: 5 }] }),
    });
    expectTypeOf(reviews).toEqualTypeOf<Source<{ app: string; stars: number }>>();
    // @ts-expect-error a sink for normalized items, after the reviews' own items
    definePipeline({ name: 'reviews-into-titles', source: reviews, sinks: [titles()] });
    definePipeline({ name: 'reviews', source: reviews, sinks: [toJsonl({ path: 'x.jsonl' }), toSqlite({ path: 'x.sqlite', columns: ['app', 'stars'] })] });
    expect([...reviews.plan().series()]).toEqual([
      { endpoint: '/appstore/reviews', query: 'com.example.notes', country: '', lang: '', id: '["/appstore/reviews","com.example.notes","",""]' },
      { endpoint: '/appstore/reviews', query: 'com.example.maps', country: 'us', lang: '', id: '["/appstore/reviews","com.example.maps","us",""]' },
    ]);
  });
});
