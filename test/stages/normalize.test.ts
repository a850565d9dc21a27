import { describe, expect, it } from 'vitest';
import { normalize, type NormalizedItem, type Page, type RunContext, searchPages, toSqlite } from '../../src/index.ts';
import { canonicalUrl, urlKey } from '../../src/stages/canonical-url.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

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

  it('keeps raw as the item served, the very value the page holds: nothing is written out until a sink stores it', async () => {
    const served = [{ title: 'a', url: 'https://a.example/', deep: { list: [1, 2, { x: null }] } }, { headline: 'b' }];
    const page = { key: 's#1', series: { id: 's', endpoint: '/searchengine/search', query: 'q', country: 'us', lang: '' }, number: 1, items: served, meta: { status: 200, requestId: undefined, fetchedAt: '2026-11-25T00:00:00.000Z', latencyMs: 1, bytes: 1, served: 2 } };
    async function* one() {
      yield page;
    }
    const out: Page<NormalizedItem>[] = [];
    const states = new Map<string, object>();
    const ctx: RunContext = {
      runId: 'r',
      pipeline: 'p',
      signal: new AbortController().signal,
      seriesState: <T extends object>(stage: string, series: { id: string }, init: () => T) => (states.get(`${stage}|${series.id}`) ?? states.set(`${stage}|${series.id}`, init()).get(`${stage}|${series.id}`)) as T,
    };
    for await (const normalized of normalize()(one(), ctx)) out.push(normalized);
    expect(out[0]?.items.map((item) => item.raw)).toEqual(served);
    // The same objects, not copies nor JSON text.
    expect(out[0]?.items[0]?.raw).toBe(served[0]);
    expect(out[0]?.items[1]?.raw).toBe(served[1]);
  });

  it('canonical URLs: scheme and host case, default port, fragment and tracking parameters go; the rest sorted', () => {
    expect(canonicalUrl('HTTPS://WWW.Example.COM:443/Path?b=2&utm_campaign=x&a=1&gclid=abc#frag')).toBe('https://www.example.com/Path?a=1&b=2');
    expect(canonicalUrl('http://example.com:80/?srsltid=1&id=7')).toBe('http://example.com/?id=7');
    expect(canonicalUrl('https://books.example/books?id=1')).not.toBe(canonicalUrl('https://books.example/books?id=2'));
    expect(canonicalUrl('  not a url ')).toBe('not a url');
    expect(canonicalUrl('https://a.example/?z=1&z=0')).toBe('https://a.example/?z=0&z=1');
    // An empty query or fragment goes as a full one does; a URL with neither is only lower-cased.
    expect(canonicalUrl('https://a.example/p?')).toBe('https://a.example/p');
    expect(canonicalUrl('https://a.example/p#')).toBe('https://a.example/p');
    expect(canonicalUrl('https://a.example/p?#x')).toBe('https://a.example/p');
    expect(canonicalUrl('HTTPS://A.Example:443/P')).toBe('https://a.example/P');
    expect(urlKey(' HTTP://Sub.A.Example:8080/x?utm_source=y ')).toEqual({ key: 'http://sub.a.example:8080/x', domain: 'sub.a.example' });
    expect(urlKey('mailto:x@a.example')).toEqual({ key: 'mailto:x@a.example', domain: null });
  });
});
