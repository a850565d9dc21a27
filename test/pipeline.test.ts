import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  canonicalUrl,
  dedupe,
  definePipeline,
  filterItems,
  type Item,
  mapItems,
  type NormalizedItem,
  normalize,
  type Page,
  run,
  searchPages,
  StageContractError,
  type Stage,
  toCsv,
  toSqlite,
  ValidationError,
} from '../src/index.ts';
import { clientFor, simulator, TEST_KEY, until } from './helpers.ts';
import { csvRows, runOn, sqliteRows, workdir } from './pipeline-helpers.ts';

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
    expect(summary.items).toEqual({ served: 6, written: 4, duplicates: 2 });
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

describe('stop rules per series', () => {
  it('empty: without count, a series runs until an empty page', async () => {
    await using sim = await simulator({ resultsPerQuery: 25 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'empty',
      source: searchPages({ queries: ['q'], maxPages: 10, count: null }),
      sinks: [toSqlite({ path: dir.path('e.sqlite') })],
      stages: [normalize()],
    });
    // 10 per page by the server's default: 10, 10, 5, then empty.
    expect(summary.series.byReason).toEqual({ empty: 1 });
    expect(summary.pages.fetched).toBe(4);
    expect(sqliteRows(dir.path('e.sqlite'), 'SELECT reason, pages FROM series')).toEqual([{ reason: 'empty', pages: 4 }]);
  });

  it('short: a page shorter than count ends the series, saving the empty request', async () => {
    await using sim = await simulator({ resultsPerQuery: 25 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'short',
      source: searchPages({ queries: ['q'], maxPages: 10, count: 10 }),
      sinks: [toSqlite({ path: dir.path('s.sqlite') })],
      stages: [normalize()],
    });
    expect(summary.series.byReason).toEqual({ short: 1 });
    expect(summary.pages.fetched).toBe(3);
    expect(sim.stats().requests).toBe(3);
  });

  it('the short-page rule can be switched off', async () => {
    await using sim = await simulator({ resultsPerQuery: 25 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'short-off',
      source: searchPages({ queries: ['q'], maxPages: 10, count: 10, stopOnShortPage: false }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('s.sqlite') })],
    });
    expect(summary.series.byReason).toEqual({ empty: 1 });
    expect(summary.pages.fetched).toBe(4);
  });

  it('max_pages: always bounded, never overshot', async () => {
    await using sim = await simulator({ resultsPerQuery: 95 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'max',
      source: searchPages({ queries: ['a', 'b'], countries: ['us', 'gb', 'de'], maxPages: 2 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('m.sqlite') })],
    });
    expect(summary.series.byReason).toEqual({ max_pages: 6 });
    expect(sim.stats().requests).toBe(12);
    const defaulted = searchPages({ queries: ['a'] }).plan();
    expect(defaulted.maxPages).toBe(5);
  });

  it('repeat: a page that repeats the previous one ends the series', async () => {
    await using sim = await simulator({ resultsPerQuery: 25, pastEnd: 'repeat-last' });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'repeat',
      source: searchPages({ queries: ['q'], maxPages: 10, count: 10, stopOnShortPage: false }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
    });
    expect(summary.series.byReason).toEqual({ repeat: 1 });
    expect(summary.pages.fetched).toBe(4);
  });

  it('no_new: K pages in a row with nothing new after dedupe', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const page = (urls: string[]) => ({ data: urls.map((url) => ({ title: url, url })) });
    sim.inject({ fault: 'status', status: 200, body: page(['https://a.example/1', 'https://a.example/2']), match: { page: 1 } });
    sim.inject({ fault: 'status', status: 200, body: page(['https://a.example/2?utm_source=x', 'https://a.example/1']), match: { page: 2 } });
    sim.inject({ fault: 'status', status: 200, body: page(['https://a.example/1#again', 'https://a.example/2']), match: { page: 3 } });
    sim.inject({ fault: 'status', status: 200, body: page(['https://a.example/3']), match: { page: 4 } });
    const summary = await runOn(sim, {
      name: 'no-new',
      source: searchPages({ queries: ['q'], maxPages: 10, count: 2, stopAfterNoNew: 2 }),
      stages: [normalize(), dedupe()],
      sinks: [toSqlite({ path: dir.path('n.sqlite') })],
    });
    expect(summary.series.byReason).toEqual({ no_new: 1 });
    expect(summary.pages.fetched).toBe(3);
  });

  it('budget: the run stops spending at its cap, and says so', async () => {
    await using sim = await simulator({ resultsPerQuery: 95 });
    using dir = workdir();
    const summary = await runOn(sim, {
      name: 'budget',
      source: searchPages({ queries: ['a', 'b'], countries: ['us', 'gb'], maxPages: 3 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('b.sqlite') })],
      budget: { maxCredits: 5 },
      rate: { concurrency: 3 },
    });
    expect(summary.status).toBe('budget');
    expect(summary.credits).toMatchObject({ spent: 5, budget: 5 });
    expect(sim.stats().credits.main?.debited).toBe(5);
    expect(summary.series.stopped.budget).toBeGreaterThan(0);
    expect(new Set(sqliteRows(dir.path('b.sqlite')).map((r) => `${r.query}|${r.country}|${r.page}`)).size).toBe(5);
  });
});

describe('pages paid for and not yet committed', () => {
  it('are never more than the concurrency, however slow the stages: what a kill could make a resume pay again', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    let unblock = () => {};
    const blocked = new Promise<void>((resolve) => (unblock = resolve));
    const slow: Stage = async function* (pages) {
      for await (const page of pages) {
        await blocked;
        yield page;
      }
    };
    const running = runOn(sim, {
      name: 'permits',
      source: searchPages({ queries: ['a', 'b', 'c', 'd', 'e', 'f'], countries: ['us'], maxPages: 3 }),
      stages: [normalize(), slow],
      sinks: [toCsv({ path: dir.path('p.csv') })],
      rate: { concurrency: 3 },
    });
    // The server answers at once: without the bound, the fetchers would fill every buffer on the way to the stuck
    // stage (and then some) long before this wait is over; with it, three requests and no more.
    await until(() => sim.stats().requests >= 3);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sim.stats().requests).toBe(3);
    unblock();
    const summary = await running;
    expect(summary).toMatchObject({ status: 'completed', pages: { fetched: 18 } });
    expect(sim.stats().requests).toBe(18);
  });
});

describe('401, 402 and 403 mid-run', () => {
  async function midRun(change: (sim: Awaited<ReturnType<typeof simulator>>) => void, keyEndpoints?: string[]) {
    const sim = await simulator({ latencyMs: 15, resultsPerQuery: 95, keys: [{ key: TEST_KEY, name: 'main', ...(keyEndpoints ? { endpoints: keyEndpoints } : {}) }] });
    const dir = workdir();
    let pages = 0;
    const summary = await runOn(
      sim,
      {
        name: 'mid-run',
        source: searchPages({ queries: ['a', 'b', 'c', 'd'], countries: ['us', 'gb'], maxPages: 5 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('m.sqlite') }), toCsv({ path: dir.path('m.csv') })],
        rate: { concurrency: 4 },
      },
      {
        onEvent(event) {
          if (event.type === 'page' && ++pages === 6) change(sim);
        },
      },
    );
    const written = new Set(sqliteRows(dir.path('m.sqlite')).map((r) => `${r.query}|${r.country}|${r.page}`));
    const csvWritten = new Set(csvRows(dir.path('m.csv')).map((r) => `${r.query}|${r.country}|${r.page}`));
    const result = { summary, written, csvWritten, stats: sim.stats() };
    await sim.close();
    dir[Symbol.dispose]();
    return result;
  }

  it('401: the run stops; every page the server answered (in flight included) is written', async () => {
    const { summary, written, csvWritten, stats } = await midRun((sim) => sim.updateKey('main', { status: 'revoked' }));
    expect(summary).toMatchObject({ status: 'stopped', reason: 'unauthorized' });
    expect(summary.message).toContain('401');
    expect(stats.byStatus['200']).toBe(summary.pages.fetched);
    expect(written.size).toBe(summary.pages.fetched);
    expect(csvWritten).toEqual(written);
    expect(summary.pages.fetched).toBeGreaterThanOrEqual(6);
    expect(summary.series.stopped.unauthorized).toBeGreaterThan(0);
  });

  it('402: the run stops the same way', async () => {
    const { summary, written, stats } = await midRun((sim) => sim.updateKey('main', { credits: sim.stats().credits.main?.debited ?? 0 }));
    expect(summary).toMatchObject({ status: 'stopped', reason: 'payment_required' });
    expect(stats.byStatus['200']).toBe(summary.pages.fetched);
    expect(written.size).toBe(summary.pages.fetched);
  });

  it('403: every series of the endpoint stops', async () => {
    const { summary, written, stats } = await midRun((sim) => sim.updateKey('main', { endpoints: [] }));
    expect(summary).toMatchObject({ status: 'stopped', reason: 'forbidden' });
    expect(stats.byStatus['200']).toBe(summary.pages.fetched);
    expect(written.size).toBe(summary.pages.fetched);
    expect(summary.series.stopped.forbidden).toBeGreaterThan(0);
  });
});

describe('sinks', () => {
  it('SQLite: WAL, schema version, explicit columns and indexes', async () => {
    await using sim = await simulator();
    using dir = workdir();
    await runOn(sim, { name: 'sqlite', source: searchPages({ queries: ['x'], maxPages: 1 }), stages: [normalize()], sinks: [toSqlite({ path: dir.path('s.sqlite'), table: 'serp' })] });
    const [mode] = sqliteRows(dir.path('s.sqlite'), 'PRAGMA journal_mode');
    expect(mode).toEqual({ journal_mode: 'wal' });
    expect(sqliteRows(dir.path('s.sqlite'), 'PRAGMA user_version')).toEqual([{ user_version: 1 }]);
    const columns = sqliteRows(dir.path('s.sqlite'), "SELECT name, type, \"notnull\" FROM pragma_table_info('serp')");
    expect(columns.map((c) => c.name)).toEqual(['run_id', 'query', 'country', 'lang', 'page', 'position', 'rank', 'title', 'url', 'domain', 'snippet', 'dedupe_key', 'fetched_at', 'raw']);
    expect(columns.find((c) => c.name === 'title')).toEqual({ name: 'title', type: 'TEXT', notnull: 0 });
    expect(columns.find((c) => c.name === 'page')).toEqual({ name: 'page', type: 'INTEGER', notnull: 1 });
    const indexes = sqliteRows(dir.path('s.sqlite'), "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'serp' ORDER BY name").map((r) => r.name);
    expect(indexes).toEqual(['serp_dedupe_key', 'serp_series']);
    expect(sqliteRows(dir.path('s.sqlite'), "SELECT name FROM pragma_index_info('serp_series')").map((r) => r.name)).toEqual(['query', 'country', 'lang', 'run_id']);
    expect(() => toSqlite({ path: 'x.sqlite', table: 'runs' })).toThrow(/sqlite.table/);
    expect(() => toSqlite({ path: 'x.sqlite', table: 'drop table;' })).toThrow(/column name/);
  });

  it('CSV: one header across runs, formulas escaped, BOM on request, a different header refused before any request', async () => {
    await using sim = await simulator();
    using dir = workdir();
    sim.inject({ fault: 'status', status: 200, body: { data: [{ title: '=HYPERLINK("http://evil")', url: 'https://a.example/', snippet: '+1 great' }] } });
    const pipeline = (name: string, sink: ReturnType<typeof toCsv>) =>
      definePipeline({ name, source: searchPages({ queries: ['x'], maxPages: 1 }), stages: [normalize()], sinks: [sink] });
    await runOn(sim, pipeline('csv', toCsv({ path: dir.path('c.csv'), bom: true })));
    await runOn(sim, pipeline('csv', toCsv({ path: dir.path('c.csv'), bom: true })));
    const text = readFileSync(dir.path('c.csv'), 'utf8');
    expect(text.startsWith('\uFEFFrun_id,')).toBe(true);
    expect(text.match(/run_id,query/g)).toHaveLength(1);
    expect(text.match(/\uFEFF/g)).toHaveLength(1);
    expect(text).toContain('\r\n');
    const rows = csvRows(dir.path('c.csv'));
    expect(rows).toHaveLength(2);
    expect(rows[0]?.title).toBe(`'=HYPERLINK("http://evil")`);
    expect(rows[0]?.snippet).toBe(`'+1 great`);

    await runOn(sim, pipeline('raw', toCsv({ path: dir.path('raw.csv'), escapeFormulas: false })));
    expect(csvRows(dir.path('raw.csv'))[0]?.title).toBe('=HYPERLINK("http://evil")');

    writeFileSync(dir.path('other.csv'), 'a,b,c\r\n1,2,3\r\n');
    const before = sim.stats().requests;
    const error = await runOn(sim, pipeline('other', toCsv({ path: dir.path('other.csv') }))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(String(error)).toContain('csv.columns');
    expect(sim.stats().requests).toBe(before);
    expect(readFileSync(dir.path('other.csv'), 'utf8')).toBe('a,b,c\r\n1,2,3\r\n');
  });

  it('a sink with default columns given raw items says to add normalize()', async () => {
    await using sim = await simulator();
    using dir = workdir();
    for (const sink of [toSqlite({ path: dir.path('raw.sqlite') }), toCsv({ path: dir.path('raw.csv') })]) {
      const error = await runOn(sim, { name: 'raw', source: searchPages({ queries: ['x'], maxPages: 1 }), sinks: [sink] }).catch((e: unknown) => e);
      expect(String(error)).toContain('add normalize() to the stages');
    }
  });

  it('several sinks at once receive the same pages', async () => {
    await using sim = await simulator();
    using dir = workdir();
    await runOn(sim, {
      name: 'many',
      source: searchPages({ queries: ['x', 'y'], maxPages: 2 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('a.sqlite') }), toSqlite({ path: dir.path('a.sqlite'), table: 'copy' }), toCsv({ path: dir.path('a.csv') })],
    });
    const a = sqliteRows(dir.path('a.sqlite'));
    const b = sqliteRows(dir.path('a.sqlite'), 'SELECT * FROM copy ORDER BY rowid');
    expect(b).toEqual(a);
    expect(csvRows(dir.path('a.csv'))).toHaveLength(a.length);
  });
});

describe('summary and state', () => {
  it('the summary holds what the run did, and is stored in the runs table', async () => {
    await using sim = await simulator({ resultsPerQuery: 95 });
    using dir = workdir();
    sim.inject({ fault: 'status', status: 503, times: 2 });
    const summary = await runOn(sim, {
      name: 'summary',
      source: searchPages({ queries: ['a', 'b'], countries: ['us'], maxPages: 2 }),
      stages: [normalize(), dedupe()],
      sinks: [toCsv({ path: dir.path('s.csv') })],
      retry: { baseDelayMs: 1 },
    });
    expect(summary).toMatchObject({
      pipeline: 'summary',
      status: 'completed',
      requests: { total: 6, byStatus: { '200': 4, '503': 2 } },
      retries: 2,
      credits: { spent: 4, uncertain: 0, budget: null },
      pages: { fetched: 4 },
      items: { served: 40 },
      series: { total: 2, completed: 2, failed: 0, stopped: {}, byReason: { max_pages: 2 } },
    });
    expect(summary.items.written + summary.items.duplicates).toBe(40);
    // No SQLite sink: the state lives beside the first sink.
    const stored = sqliteRows(dir.path('summary.state.sqlite'), 'SELECT run_id, status, summary FROM runs');
    expect(stored).toHaveLength(1);
    expect(JSON.parse(String(stored[0]?.summary))).toEqual(summary);
  });

  it('failed series are reported, and the others complete', async () => {
    await using sim = await simulator();
    using dir = workdir();
    sim.inject({ fault: 'status', status: 400, match: { q: 'bad' } });
    const summary = await runOn(sim, {
      name: 'failing',
      source: searchPages({ queries: ['bad', 'good'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('f.sqlite') })],
    });
    expect(summary).toMatchObject({ status: 'failed_series', series: { failed: 1, completed: 1 } });
    const series = sqliteRows(dir.path('f.sqlite'), 'SELECT query, reason, error FROM series ORDER BY query');
    expect(series[0]).toMatchObject({ query: 'bad', reason: 'failed', error: expect.stringContaining('400') });
  });

  it('no base URL is a configuration error before any request (never a silent fallback)', async () => {
    using dir = workdir();
    const error = await run(
      { name: 'nourl', source: searchPages({ queries: ['x'] }), sinks: [toCsv({ path: dir.path('n.csv') })] },
      { env: { WEBDATA_API_KEY: TEST_KEY } },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(String(error)).toContain('api.baseUrl');
    expect(String(error)).toContain('WEBDATA_BASE_URL');
  });

  it('bad definitions are refused with the field named', () => {
    expect(() => searchPages({ queries: ['x'], countries: ['uk'] })).toThrow(/search\.countries\.0: .*did you mean "gb"/);
    expect(() => searchPages({ queries: [] })).toThrow(/search\.queries: must hold at least one query/);
    expect(() => searchPages({ queries: ['x'], maxPages: 0, count: -1 })).toThrow(/search\.maxPages[\s\S]*search\.count/);
    expect(() => definePipeline({ name: 'bad name!', source: searchPages({ queries: ['x'] }), sinks: [] })).toThrow(/name:[\s\S]*sinks: needs at least one sink/);
    expect(() => dedupe({ scope: 'planet' } as never)).toThrow(/dedupe\.scope: must be "series", "query" or "global"/);
  });
});

describe('normalize', () => {
  it('finds fields by the aliases real APIs use, and keeps what it cannot use in raw', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const depth = 20_000;
    const data = [
      { name: 'Bing style', url: 'https://bing.example/', snippet: 'from bing' },
      { title: 'Serp style', link: 'https://serp.example/', snippet: 's' },
      { title: '  Cafe\u0301  ', url: 'https://brave.example/', description: 'brave' },
      { title: 'Tavily', url: 'https://tavily.example/', content: 'tavily' },
      { href: 'https://href.example/', title: 12345, snippet: { html: '<b>x</b>' } },
      { title: 'nul\u0000 and lone \ud800 surrogate', url: 'https://odd.example/', deep: 'DEEP' },
      { url: 'not a url at all' },
    ];
    // Nesting deeper than JSON.stringify can handle (JSON.parse can): sent as text.
    const body = JSON.stringify({ data }).replace('"DEEP"', `${'{"next":'.repeat(depth)}{}${'}'.repeat(depth)}`);
    sim.inject({ fault: 'status', status: 200, body, times: 1 });
    await runOn(sim, {
      name: 'aliases',
      source: searchPages({ queries: ['x'], maxPages: 1, count: null }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('n.sqlite') })],
    });
    const rows = sqliteRows(dir.path('n.sqlite'));
    expect(rows.map((r) => [r.title, r.url, r.domain, r.snippet])).toEqual([
      ['Bing style', 'https://bing.example/', 'bing.example', 'from bing'],
      ['Serp style', 'https://serp.example/', 'serp.example', 's'],
      ['Café', 'https://brave.example/', 'brave.example', 'brave'],
      ['Tavily', 'https://tavily.example/', 'tavily.example', 'tavily'],
      ['12345', 'https://href.example/', 'href.example', null],
      ['nul and lone \ufffd surrogate', 'https://odd.example/', 'odd.example', null],
      [null, 'not a url at all', null, null],
    ]);
    expect(rows[2]?.title).toBe('Caf\u00e9');
    // raw keeps the item as received, however deep.
    expect(String(rows[5]?.raw).length).toBeGreaterThan(depth * 8);
    let nested = JSON.parse(String(rows[5]?.raw)).deep;
    let levels = 0;
    while (nested.next) {
      nested = nested.next;
      levels += 1;
    }
    expect(levels).toBe(depth);
    expect(JSON.parse(String(rows[4]?.raw))).toEqual(data[4]);
  });

  it('canonical URLs: scheme and host case, default port, fragment and tracking parameters go; the rest sorted', () => {
    expect(canonicalUrl('HTTPS://WWW.Example.COM:443/Path?b=2&utm_campaign=x&a=1&gclid=abc#frag')).toBe('https://www.example.com/Path?a=1&b=2');
    expect(canonicalUrl('http://example.com:80/?srsltid=1&id=7')).toBe('http://example.com/?id=7');
    expect(canonicalUrl('https://books.example/books?id=1')).not.toBe(canonicalUrl('https://books.example/books?id=2'));
    expect(canonicalUrl('  not a url ')).toBe('not a url');
    expect(canonicalUrl('https://a.example/?z=1&z=0')).toBe('https://a.example/?z=0&z=1');
  });
});
