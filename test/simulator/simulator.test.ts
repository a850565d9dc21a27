import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { type Item } from '../../src/index.ts';
import { createClient } from '../../src/client/index.ts';
import { clientFor, rejection, simulator, TEST_KEY, until } from '../helpers.ts';

const urlOf = (item: Item | undefined) => String(item?.url ?? item?.link ?? '');

describe('deterministic results', () => {
  it('the same seed answers the same; another seed answers differently', async () => {
    await using a = await simulator({ seed: 11 });
    await using b = await simulator({ seed: 11 });
    await using c = await simulator({ seed: 12 });
    const params = { q: 'espresso machine', page: 2, count: 10, country: 'us', lang: 'en' };
    const [ra, rb, rc] = await Promise.all([a, b, c].map(async (sim) => (await clientFor(sim).search(params)).data));
    expect(ra).toEqual(rb);
    expect(ra).not.toEqual(rc);
  });

  it('a query has a finite result set: full pages, a short last page, then empty pages', async () => {
    await using sim = await simulator({ resultsPerQuery: 45 });
    await using client = clientFor(sim);
    const sizes: number[] = [];
    for (let page = 1; page <= 7; page++) sizes.push((await client.search({ q: 'finite', page, count: 10 })).data.length);
    expect(sizes).toEqual([10, 10, 10, 10, 5, 0, 0]);
  });

  it('pages past the end can repeat the last page, as some engines do', async () => {
    await using sim = await simulator({ resultsPerQuery: 25, pastEnd: 'repeat-last' });
    await using client = clientFor(sim);
    const last = await client.search({ q: 'repeat', page: 3, count: 10 });
    const past = await client.search({ q: 'repeat', page: 4, count: 10 });
    const further = await client.search({ q: 'repeat', page: 9, count: 10 });
    expect(last.data.length).toBeLessThan(10);
    expect(past.data).toEqual(last.data);
    expect(further.data).toEqual(last.data);
  });

  it('items slide across page boundaries: some page starts with the previous page’s last item', async () => {
    await using sim = await simulator({ resultsPerQuery: 95 });
    await using client = clientFor(sim);
    let slides = 0;
    for (const q of ['a', 'b', 'c', 'd', 'e']) {
      let previous: Item[] = [];
      for (let page = 1; page <= 5; page++) {
        const { data } = await client.search({ q, page, count: 10, country: 'us' });
        if (page > 1 && urlOf(data[0]) === urlOf(previous.at(-1))) slides += 1;
        previous = data;
      }
    }
    expect(slides).toBeGreaterThan(0);
  });

  it('countries share most results, in a different order, with some of their own', async () => {
    await using sim = await simulator({ resultsPerQuery: 60 });
    await using client = clientFor(sim);
    const urls = async (country: string) => (await client.search({ q: 'overlap', count: 60, country })).data.map(urlOf);
    const [us, de] = [await urls('us'), await urls('de')];
    const shared = us.filter((u) => de.includes(u)).length;
    expect(shared).toBeGreaterThan(30);
    expect(shared).toBeLessThan(60);
    expect(us).not.toEqual(de);
  });

  it('field names vary by engine family, as in real APIs', async () => {
    const families = { serp: ['title', 'link', 'snippet'], bing: ['name', 'url', 'snippet'], brave: ['title', 'url', 'description'], tavily: ['title', 'url', 'content'] };
    for (const [shape, fields] of Object.entries(families)) {
      await using sim = await simulator({ shape: shape as keyof typeof families, untitledRate: 0 });
      const { data } = await clientFor(sim).search({ q: 'shapes', count: 5 });
      for (const item of data) expect(Object.keys(item)).toEqual(expect.arrayContaining(fields));
    }
    // Mixed (the default): each query gets one family, so a run sees several.
    await using sim = await simulator();
    const client = clientFor(sim);
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) seen.add(Object.keys((await client.search({ q: `query ${i}`, count: 1 })).data[0] ?? {}).sort().join());
    expect(seen.size).toBeGreaterThan(1);
  });

  it('some items have no title', async () => {
    await using sim = await simulator({ untitledRate: 0.2, shape: 'brave' });
    const { data } = await clientFor(sim).search({ q: 'untitled', count: 50 });
    const untitled = data.filter((item) => !('title' in item));
    expect(untitled.length).toBeGreaterThan(0);
    expect(untitled.length).toBeLessThan(50);
  });

  it('the JSON is what real engines send: tracking parameters, fragments, odd hosts, text that is not NFC', async () => {
    await using sim = await simulator({ resultsPerQuery: 95, shape: 'serp' });
    await using client = clientFor(sim);
    const items = (await client.search({ q: 'quirks', count: 95 })).data;
    const links = items.map(urlOf);
    expect(links.some((u) => u.includes('utm_source='))).toBe(true);
    expect(links.some((u) => u.includes('#'))).toBe(true);
    expect(links.some((u) => /https:\/\/[^/]*[A-Z]/.test(u))).toBe(true);
    const titles = items.map((i) => String(i.title ?? ''));
    expect(titles.some((t) => t !== t.normalize('NFC') || t !== t.trim() || /[^\u0000-\u007f]/.test(t))).toBe(true);
  });

  it("itemSize 'real': items as large as real engines' of each family, the same results; short by default", async () => {
    // Mean bytes of JSON per item in public responses of each family (serp about 580, Bing 840, Brave 1,870, Tavily 565).
    const corpus = { serp: [450, 800], bing: [700, 1100], brave: [1500, 2200], tavily: [450, 700] } as const;
    const bytes = (items: Item[]) => items.reduce((sum, item) => sum + Buffer.byteLength(JSON.stringify(item)), 0) / items.length;
    for (const [shape, [low, high]] of Object.entries(corpus)) {
      await using real = await simulator({ shape: shape as keyof typeof corpus, itemSize: 'real', resultsPerQuery: 100 });
      await using short = await simulator({ shape: shape as keyof typeof corpus, resultsPerQuery: 100 });
      const params = { q: 'item sizes', count: 100, country: 'de' };
      const [large, small] = [(await clientFor(real).search(params)).data, (await clientFor(short).search(params)).data];
      expect(bytes(large), shape).toBeGreaterThan(low);
      expect(bytes(large), shape).toBeLessThan(high);
      expect(bytes(small), shape).toBeLessThan(low);
      // The same results in the same order, each with at least the fields of the short one.
      expect(large.map(urlOf)).toEqual(small.map(urlOf));
      for (const [i, item] of small.entries()) expect(Object.keys(large[i] ?? {})).toEqual(expect.arrayContaining(Object.keys(item)));
    }
  });
});

describe('plans, credits and limits', () => {
  it('debits credits by endpoint weight on 2xx only', async () => {
    await using sim = await simulator({ weights: { '/searchengine/search': 1, '/video/search': 5, '/products/search': 3 } });
    await using client = clientFor(sim);
    await client.search({ q: 'x' });
    await client.request({ path: '/video/search', query: { q: 'x' } });
    await client.request({ path: '/products/search', body: { query: 'x' } });
    await rejection(client.request({ path: '/video/search', query: {} })); // 400: not charged
    sim.inject({ fault: 'status', status: 503, times: 1 });
    await rejection(client.search({ q: 'x' })); // 503: not charged
    expect(sim.stats().credits.main).toEqual({ debited: 9, remaining: null });
    expect(sim.stats().byStatus).toEqual({ '200': 3, '400': 1, '503': 1 });
  });

  it('concurrent requests never take a balance below zero', async () => {
    await using sim = await simulator({ latencyMs: 20, keys: [{ key: TEST_KEY, name: 'main', credits: 5 }] });
    await using client = clientFor(sim);
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => client.search({ q: `c${i}` })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    expect(sim.stats().credits.main).toEqual({ debited: 5, remaining: 0 });
    expect(sim.stats().byStatus['402']).toBe(7);
  });

  it('a token bucket per key answers 429 when it is empty, and refills with time', async () => {
    let now = 0;
    await using sim = await simulator({ clock: () => now, keys: [{ key: TEST_KEY, name: 'main', ratePerSecond: 2, burst: 3 }] });
    await using client = clientFor(sim);
    for (let i = 0; i < 3; i++) await client.search({ q: 'burst' });
    const limited = await rejection(client.search({ q: 'burst' }));
    expect(limited).toMatchObject({ status: 429, retryAfterMs: 1000 });
    now += 500; // one token back
    await client.search({ q: 'burst' });
    expect(await rejection(client.search({ q: 'burst' }))).toMatchObject({ status: 429 });
  });

  it('a quota answers 429 with a Retry-After until the end of its window', async () => {
    let now = 0;
    await using sim = await simulator({ clock: () => now, keys: [{ key: TEST_KEY, name: 'main', quota: { requests: 2, windowMs: 3_600_000 } }] });
    await using client = clientFor(sim);
    await client.search({ q: 'q' });
    await client.search({ q: 'q' });
    now = 600_000;
    expect(await rejection(client.search({ q: 'q' }))).toMatchObject({ status: 429, retryAfterMs: 3_000_000 });
    now = 3_600_000;
    expect((await client.search({ q: 'q' })).status).toBe(200);
  });

  it('too many requests in flight at once get a 429', async () => {
    await using sim = await simulator({ latencyMs: 50, keys: [{ key: TEST_KEY, name: 'main', maxConcurrent: 2 }] });
    await using client = clientFor(sim);
    const results = await Promise.allSettled([1, 2, 3, 4].map((i) => client.search({ q: `in flight ${i}` })));
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(2);
    expect(sim.stats().maxInFlight).toBeGreaterThanOrEqual(2);
  });

  it('a plan can change mid-run: credits added, key revoked', async () => {
    await using sim = await simulator({ keys: [{ key: TEST_KEY, name: 'main', credits: 1 }] });
    await using client = clientFor(sim);
    await client.search({ q: 'x' });
    expect(await rejection(client.search({ q: 'x' }))).toMatchObject({ status: 402 });
    sim.updateKey('main', { credits: 10 });
    await client.search({ q: 'x' });
    sim.updateKey('main', { status: 'revoked' });
    expect(await rejection(client.search({ q: 'x' }))).toMatchObject({ status: 401 });
  });
});

describe('catalog endpoints', () => {
  it('app reviews page with a cursor until it is null', async () => {
    await using sim = await simulator();
    await using client = clientFor(sim);
    let cursor: string | null | undefined;
    let total = 0;
    let pages = 0;
    do {
      const { body } = await client.request<{ data: Item[]; next_cursor: string | null }>({
        path: '/appstore/reviews',
        query: { app_id: 'com.example', store: 'ios', cursor: cursor ?? undefined },
      });
      total += body.data.length;
      cursor = body.next_cursor;
      pages += 1;
    } while (cursor && pages < 20);
    expect(cursor).toBeNull();
    expect(total).toBeGreaterThanOrEqual(40);
    expect(sim.stats().credits.main?.debited).toBe(pages);
  });

  it('each endpoint answers a bad request with its own error body', async () => {
    await using sim = await simulator();
    await using client = clientFor(sim);
    const bodies = await Promise.all([
      rejection(client.search({ q: 'x', count: 1000 })),
      rejection(client.request({ path: '/video/search' })),
      rejection(client.request({ path: '/appstore/reviews' })),
      rejection(client.request({ path: '/products/search', body: {} })),
    ]);
    expect(bodies.map((e) => (e as { body?: string }).body)).toEqual([
      expect.stringContaining('"error":{"code":"invalid_request"'),
      expect.stringContaining('"message":"Missing required parameter: q"'),
      'Bad Request: app_id is required',
      expect.stringContaining('"errors":[{"field":"query"'),
    ]);
  });
});

describe('faults', () => {
  it('scripted rules match by request, skip the first `after`, and stop after `times`', async () => {
    await using sim = await simulator();
    await using client = clientFor(sim);
    sim.inject({ fault: 'status', status: 500, match: { q: 'flaky', page: 2 }, after: 1, times: 2 });
    const outcome = async (page: number) => (await client.search({ q: 'flaky', page }).then(() => 200, (e: { status: number }) => e.status));
    expect([await outcome(2), await outcome(2), await outcome(1), await outcome(2), await outcome(2)]).toEqual([200, 500, 200, 500, 200]);
  });

  it('random fault rates follow the seed', async () => {
    const run = async () => {
      await using sim = await simulator({ seed: 5, faults: { serverErrorRate: 0.3 } });
      await using client = clientFor(sim);
      const statuses: number[] = [];
      for (let i = 0; i < 30; i++) statuses.push(await client.search({ q: `r${i}` }).then(() => 200, (e: { status: number }) => e.status));
      return statuses;
    };
    const first = await run();
    expect(first.filter((s) => s >= 500).length).toBeGreaterThan(3);
    expect(await run()).toEqual(first);
  });

  it('a gate holds matching requests unanswered until released, uncharged while held', async () => {
    await using sim = await simulator({ keys: [{ key: TEST_KEY, name: 'main', credits: 10 }] });
    await using client = clientFor(sim);
    const gate = sim.park({ q: 'held' });
    const held = [client.search({ q: 'held', page: 1 }), client.search({ q: 'held', page: 2 })];
    // Another query passes by.
    expect((await client.search({ q: 'free' })).status).toBe(200);
    await gate.reached(2);
    expect(gate.waiting).toBe(2);
    expect(sim.stats().credits.main?.debited).toBe(1);
    gate.release();
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200]);
    expect(gate.waiting).toBe(0);
    // Released for good: later requests go straight on.
    expect((await client.search({ q: 'held', page: 3 })).status).toBe(200);
    expect([gate.arrived, sim.stats().credits.main?.debited]).toEqual([2, 4]);
  });

  it('wall-clock time comes from its epoch option: Unix-time resets and HTTP dates are the injected time, not the system’s', async () => {
    const at = Date.UTC(2030, 0, 1);
    await using sim = await simulator({
      epoch: () => at,
      rateLimitHeaders: 'x-ratelimit',
      retryAfter: 'http-date',
      keys: [{ key: TEST_KEY, name: 'main', quota: { requests: 1, windowMs: 60_000 } }],
    });
    const client = clientFor(sim);
    const first = await client.search({ q: 'a' });
    const reset = Number(first.headers['x-ratelimit-reset']);
    expect(reset * 1000 - at).toBeGreaterThan(0);
    expect(reset * 1000 - at).toBeLessThanOrEqual(60_000);
    const res = await fetch(`${sim.url}/searchengine/search?q=b`, { headers: { 'x-api-key': TEST_KEY } });
    expect(res.status).toBe(429);
    expect(Date.parse(res.headers.get('retry-after') ?? '') - at).toBeGreaterThan(0);
    expect(Date.parse(res.headers.get('retry-after') ?? '') - at).toBeLessThanOrEqual(62_000);
    await client.close();
  });

  it('latency delays answers', async () => {
    await using sim = await simulator({ latencyMs: 60 });
    await using client = clientFor(sim);
    const { durationMs } = await client.search({ q: 'slow' });
    expect(durationMs).toBeGreaterThanOrEqual(55);
  });
});

describe('simulate command', () => {
  it('starts on the given port, prints the variables to use, and stops on SIGTERM', async () => {
    const child = spawn(process.execPath, ['src/cli/main.ts', 'simulate', '--port', '0', '--seed', '3', '--key', TEST_KEY, '--rate', '100'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines = createInterface({ input: child.stdout });
    const vars: Record<string, string> = {};
    for await (const line of lines) {
      const [name, value] = line.split('=');
      if (name && value) vars[name] = value;
      if (vars.WEBDATA_API_KEY) break;
    }
    expect(vars.WEBDATA_BASE_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1$/);
    await using client = createClient({ baseUrl: vars.WEBDATA_BASE_URL as string, apiKey: vars.WEBDATA_API_KEY as string });
    expect((await client.search({ q: 'from the cli' })).data).toHaveLength(10);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
  });

  it('--drift-every: the same query a drift period later is ranked otherwise; without it, never; a bad period is refused (exit 2)', async () => {
    const started = async (args: string[]) => {
      const child = spawn(process.execPath, ['src/cli/main.ts', 'simulate', '--port', '0', '--key', TEST_KEY, '--rate', '100', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      const lines = createInterface({ input: child.stdout });
      for await (const line of lines) if (line.startsWith('WEBDATA_BASE_URL=')) return { child, url: line.slice('WEBDATA_BASE_URL='.length) };
      throw new Error('simulate printed no WEBDATA_BASE_URL');
    };
    const ranking = async (url: string) => {
      await using client = createClient({ baseUrl: url, apiKey: TEST_KEY });
      return (await client.search({ q: 'drifting coffee', count: 50 })).data.map((item) => JSON.stringify(item));
    };
    /** The next wall-clock second: a drift of 1s re-ranks at each. */
    const nextSecond = async () => {
      const second = Math.floor(Date.now() / 1000);
      await until(() => Math.floor(Date.now() / 1000) > second);
    };
    const drifting = await started(['--drift-every', '1s']);
    const still = await started([]);
    try {
      const before = [await ranking(drifting.url), await ranking(still.url)];
      await nextSecond();
      const after = [await ranking(drifting.url), await ranking(still.url)];
      expect(after[0]).not.toEqual(before[0]);
      expect(after[1]).toEqual(before[1]);
    } finally {
      for (const { child } of [drifting, still]) child.kill('SIGTERM');
    }
    for (const bad of ['soon', '-5', '1d', '']) {
      const child = spawn(process.execPath, ['src/cli/main.ts', 'simulate', '--port', '0', `--drift-every=${bad}`], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const [code] = await once(child, 'exit');
      expect(code, bad).toBe(2);
      expect(stderr).toContain('--drift-every must be milliseconds (5000) or a duration such as 500ms, 5s, 2m or 1h');
    }
  });
});
