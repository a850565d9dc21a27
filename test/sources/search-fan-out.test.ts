import { describe, expect, it } from 'vitest';
import { dedupe, filterItems, type Item, mapItems, type NormalizedItem, normalize, type Page, searchPages, type Stage, toCsv, toSqlite } from '../../src/index.ts';
import { StageContractError } from '../../src/errors/index.ts';
import { clientFor, simulator } from '../helpers.ts';
import { csvRows, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const itemUrl = (item: Item) => (item.url ?? item.link ?? item.href ?? null) as string | null;
const itemTitle = (item: Item) => (item.title ?? item.name ?? null) as string | null;

describe('a search fan-out into SQLite and CSV', () => {
  it('writes one row per item served, with its page and position; absent titles are NULL and empty cells', async () => {
    await using sim = await simulator({ seed: 4, untitledRate: 0.25 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'fidelity',
      source: searchPages({ queries: ['espresso machine', 'green tea'], countries: ['us', 'de'], langs: ['en'], maxPages: 3 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('out.sqlite') }), toCsv({ path: dir.path('out.csv') })],
    });
    expect(summary).toMatchObject({ status: 'completed', pages: { fetched: 12 }, series: { total: 4, completed: 4 } });

    // What the simulator serves for the same requests, fetched independently.
    await using client = clientFor(sim);
    const rows = sqliteRows(dir.path('out.sqlite'), 'SELECT * FROM results ORDER BY query, country, page, position');
    const expected: { query: string; country: string; page: number; position: number; item: Item }[] = [];
    for (const query of ['espresso machine', 'green tea']) {
      for (const country of ['de', 'us']) {
        for (let page = 1; page <= 3; page++) {
          const { data } = await client.search({ q: query, country, lang: 'en', page, count: 10 });
          data.forEach((item, i) => expected.push({ query, country, page, position: i + 1, item }));
        }
      }
    }
    expect(rows).toHaveLength(expected.length);
    rows.forEach((row, i) => {
      const { query, country, page, position, item } = expected[i] as (typeof expected)[number];
      expect(row).toMatchObject({ query, country, lang: 'en', page, position, url: itemUrl(item), title: itemTitle(item)?.normalize('NFC').trim() ?? null });
      expect(JSON.parse(row.raw as string)).toEqual(item);
    });
    expect(rows.some((row) => row.title === null)).toBe(true);

    const csv = csvRows(dir.path('out.csv'));
    const byKey = (r: Record<string, unknown>) => `${r.query}|${r.country}|${r.page}|${r.position}`;
    const csvByKey = new Map(csv.map((r) => [byKey(r), r]));
    for (const row of rows) {
      const cell = csvByKey.get(byKey(row));
      expect(cell?.title).toBe(row.title === null ? '' : String(row.title));
      expect(cell?.url).toBe(String(row.url));
    }
  });

  it('the CSV read back equals the SQLite rows, column for column (raw aside)', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    await runOn(sim, {
      name: 'roundtrip',
      source: searchPages({ queries: ['naïve café', 'ümlaut "quotes", commas'], countries: ['fr'], maxPages: 2 }),
      stages: [normalize(), dedupe()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') }), toCsv({ path: dir.path('r.csv'), escapeFormulas: false })],
    });
    const rows = sqliteRows(dir.path('r.sqlite'));
    const csv = csvRows(dir.path('r.csv'));
    expect(csv).toHaveLength(rows.length);
    csv.forEach((cells, i) => {
      const row = rows[i] as Record<string, unknown>;
      for (const [column, cell] of Object.entries(cells)) expect(cell).toBe(row[column] === null ? '' : String(row[column]));
    });
  });

  it('dedupes on the canonical URL within a series, counting duplicates per page; two ?id= values stay two', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const served = [
      { title: 'A', url: 'https://Example.com:443/a?utm_source=x&b=2&a=1#top' },
      { title: 'A again', url: 'https://example.com/a?a=1&b=2&fbclid=zz' },
      { title: 'Book 1', url: 'https://books.example/books?id=1' },
      { title: 'Book 2', url: 'https://books.example/books?id=2' },
    ];
    sim.inject({ fault: 'status', status: 200, body: { data: served }, match: { q: 'dupes', page: 1 } });
    sim.inject({ fault: 'status', status: 200, body: { data: [{ url: 'https://books.example/books?id=2&utm_medium=mail' }, { url: 'https://new.example/' }] }, match: { q: 'dupes', page: 2 } });
    const pages: Page<NormalizedItem>[] = [];
    const spy: Stage<NormalizedItem, NormalizedItem> = async function* (input) {
      for await (const page of input) {
        pages.push(page);
        yield page;
      }
    };
    const summary = await runOn(sim, {
      name: 'dedupe',
      source: searchPages({ queries: ['dupes'], maxPages: 2, count: null }),
      stages: [normalize(), dedupe({ key: 'url' }), spy],
      sinks: [toSqlite({ path: dir.path('d.sqlite') })],
    });
    expect(pages.map((p) => p.meta.dedupe)).toEqual([
      { new: 3, duplicates: 1 },
      { new: 1, duplicates: 1 },
    ]);
    expect(summary.items).toEqual({ served: 6, written: 4, duplicates: 2, dropped: 0 });
    const rows = sqliteRows(dir.path('d.sqlite'));
    expect(rows.map((r) => [r.title, r.rank, r.position, r.dedupe_key])).toEqual([
      ['A', 1, 1, 'https://example.com/a?a=1&b=2'],
      ['Book 1', 2, 3, 'https://books.example/books?id=1'],
      ['Book 2', 3, 4, 'https://books.example/books?id=2'],
      [null, 4, 2, 'https://new.example/'],
    ]);
  });

  it('dedupes by a list of fields or a function', async () => {
    await using sim = await simulator({ shape: 'serp', resultsPerQuery: 30 });
    using dir = workdir();
    const byDomain = await runOn(sim, {
      name: 'by-domain',
      source: searchPages({ queries: ['domains'], maxPages: 3 }),
      stages: [normalize(), dedupe({ key: ['domain'] })],
      sinks: [toSqlite({ path: dir.path('a.sqlite') })],
    });
    const domains = sqliteRows(dir.path('a.sqlite')).map((r) => r.domain);
    expect(new Set(domains).size).toBe(domains.length);
    expect(byDomain.items.duplicates).toBeGreaterThan(0);

    await runOn(sim, {
      name: 'by-function',
      source: searchPages({ queries: ['domains'], maxPages: 3 }),
      stages: [normalize(), dedupe({ key: (item) => String(item.title ?? '').slice(0, 5) || null })],
      sinks: [toSqlite({ path: dir.path('b.sqlite') })],
    });
    const prefixes = sqliteRows(dir.path('b.sqlite')).filter((r) => r.title).map((r) => String(r.title).slice(0, 5));
    expect(new Set(prefixes).size).toBe(prefixes.length);
  });

  it('a user’s own stage runs in the middle, as first-class as ours', async () => {
    await using sim = await simulator({ seed: 8 });
    using dir = workdir();
    const onlyWiki: Stage<NormalizedItem, NormalizedItem> = async function* (pages) {
      for await (const page of pages) yield { ...page, items: page.items.filter((item) => item.domain?.endsWith('.org') ?? false) };
    };
    const summary = await runOn(sim, {
      name: 'own-stage',
      source: searchPages({ queries: ['history of tea'], countries: ['gb'], maxPages: 3 }),
      stages: [normalize(), onlyWiki, mapItems((item: NormalizedItem) => ({ ...item, title: item.title?.toUpperCase() ?? null })), dedupe()],
      sinks: [toCsv({ path: dir.path('o.csv') })],
    });
    const rows = csvRows(dir.path('o.csv'));
    expect(rows.length).toBe(summary.items.written);
    expect(rows.length).toBeLessThan(summary.items.served);
    for (const row of rows) {
      expect(row.domain).toMatch(/\.org$/);
      expect(row.title).toBe(row.title?.toUpperCase());
    }
    // Pages emptied by a filter still count as fetched and committed.
    expect(summary.pages.fetched).toBe(3);
  });

  it('refuses a stage that drops a page, and the run ends with the error', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const dropsSecond: Stage = async function* (pages) {
      for await (const page of pages) if (page.number !== 2) yield page;
    };
    const error = await runOn(sim, {
      name: 'bad-stage',
      source: searchPages({ queries: ['x'], maxPages: 3 }),
      stages: [normalize(), dropsSecond],
      sinks: [toSqlite({ path: dir.path('bad.sqlite') })],
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StageContractError);
    expect(String(error)).toContain('#2');
    const runs = sqliteRows(dir.path('bad.sqlite'), 'SELECT status, error FROM runs');
    expect(runs).toEqual([{ status: 'interrupted', error: expect.stringContaining('stages must yield every page they take') }]);
  });

  it('item helpers: filterItems keeps pages, even empty ones', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'filter',
      source: searchPages({ queries: ['x'], maxPages: 2 }),
      stages: [normalize(), filterItems(() => false)],
      sinks: [toSqlite({ path: dir.path('f.sqlite') })],
    });
    expect(summary).toMatchObject({ pages: { fetched: 2 }, items: { written: 0 } });
  });
});
