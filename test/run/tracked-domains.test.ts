// Tracked domains and depth until found (issue 42, items 1 and 2): each series keeps its tracked domains' best ranks
// and how deep it was searched, and with depth until found ends on the page where the last of them appeared plus a
// margin. Measured against the simulator's ground truth on a day, over real sockets: the pages each series cost are
// the requests the simulator counted for its query.
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dedupe, definePipeline, endpointPages, normalize, run, searchPages, toSqlite } from '../../src/index.ts';
import { exitCodeFor } from '../../src/run/exit-codes.ts';
import { hostsIn, trackedHost } from '../../src/pipeline/tracked-domains.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { expectRefused, simulator, TEST_KEY, thrown } from '../helpers.ts';
import { csvRows, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { pipelineFromConfig } from '../../src/config/json-config.ts';
import { exportReport } from '../../src/analytics/index.ts';
import { renderReport } from '../../src/report/index.ts';
import Database from 'better-sqlite3';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { trackedHistory } from '../../src/run/record-tracked.ts';
import { runChild } from './resume-helpers.ts';
import { cli, config, envFor } from '../cli-helpers.ts';

const DAY = 4;
const bare = (domain: string) => domain.replace(/^www\./, '');

/** Requests the simulator answered for each query. */
function pagesByQuery(sim: Simulator): Map<string, number> {
  const counts = new Map<string, number>();
  for (const entry of sim.log()) {
    const q = new URLSearchParams(entry.query).get('q');
    if (q !== null && entry.status === 200) counts.set(q, (counts.get(q) ?? 0) + 1);
  }
  return counts;
}

/** A domain of the series whose best rank on the day is on `page` (pages of 10), as the ground truth has it. */
function domainOnPage(sim: Simulator, q: string, page: number, not: readonly string[] = []): { domain: string; rank: number } {
  const ranking = sim.ranking({ q, country: 'us', lang: 'en' });
  for (const result of ranking) {
    const domain = bare(result.domain);
    const best = sim.rankOf({ q, country: 'us', lang: 'en' }, domain);
    if (best !== null && best > (page - 1) * 10 && best <= page * 10 && !not.includes(domain)) return { domain: result.domain, rank: best };
  }
  throw new Error(`no domain of "${q}" is first on page ${page}`);
}

/** The same host as the ranking has it, written the other way: with `www.` where it has none and none where it has, upper case. */
const otherSpelling = (domain: string) => (domain.startsWith('www.') ? bare(domain) : `www.${domain}`).toUpperCase();

function pipeline(path: string, queries: string[], extra: Record<string, unknown>) {
  return definePipeline({
    name: 'tracked',
    source: searchPages({ queries, countries: ['us'], langs: ['en'], maxPages: 5, count: 10 }),
    stages: [normalize()],
    sinks: [toSqlite({ path })],
    ...extra,
  });
}

describe('a tracked domain', () => {
  it('is a host, matched with or without www. and in any case; a cell of a queries file names several', () => {
    expect(['Example.COM', 'www.example.com', 'WWW.EXAMPLE.COM.', ' example.com '].map(trackedHost)).toEqual(['example.com', 'example.com', 'example.com', 'example.com']);
    // Only a leading www. before a name of its own: www.com is a domain.
    expect([trackedHost('www.com'), trackedHost('shop.www.example.com')]).toEqual(['www.com', 'shop.www.example.com']);
    expect(hostsIn('a.example, www.B.example;c.example  a.example')).toEqual({ hosts: ['a.example', 'b.example', 'c.example'], bad: [] });
    expect(hostsIn('https://a.example/x example')).toEqual({ hosts: [], bad: ['https://a.example/x', 'example'] });
    expect(hostsIn(undefined)).toEqual({ hosts: [], bad: [] });
  });
});

describe('depth until found', () => {
  for (const margin of [0, 1]) {
    it(`ends a series on the page its domain was found on, plus a margin of ${margin}, and keeps its best rank`, async () => {
      await using sim = await simulator({ seed: 11, day: DAY });
      using dir = workdir();
      const { domain, rank } = domainOnPage(sim, 'espresso', 2);
      const summary = await runOn(sim, pipeline(dir.path('out.sqlite'), ['espresso'], { track: { domains: [otherSpelling(domain)] }, refresh: { depth: 'until-found', margin } }));
      expect(summary.status).toBe('completed');
      expect(pagesByQuery(sim).get('espresso')).toBe(2 + margin);
      expect(summary.series.byReason).toEqual({ found: 1 });
      expect(sqliteRows(dir.path('out.sqlite'), 'SELECT query, country, lang, domain, rank, searched FROM results_tracked')).toEqual([
        { query: 'espresso', country: 'us', lang: 'en', domain: bare(domain.toLowerCase()), rank, searched: (2 + margin) * 10 },
      ]);
      // The view says it in words too.
      expect(sqliteRows(dir.path('out.sqlite'), 'SELECT domain, rank, found, position FROM report_tracked')).toEqual([{ domain: bare(domain), rank, found: 1, position: String(rank) }]);
    });
  }

  it('ends when the last of several domains is found; a domain never found pays the full depth, "not found within N"', async () => {
    await using sim = await simulator({ seed: 11, day: DAY });
    using dir = workdir();
    const first = domainOnPage(sim, 'tamper', 1);
    const third = domainOnPage(sim, 'tamper', 3, [bare(first.domain)]);
    const several = await runOn(sim, pipeline(dir.path('several.sqlite'), ['tamper'], { track: { domains: [third.domain, first.domain] }, refresh: { depth: 'until-found' } }));
    expect(several.series.byReason).toEqual({ found: 1 });
    expect(pagesByQuery(sim).get('tamper')).toBe(3);
    expect(sqliteRows(dir.path('several.sqlite'), 'SELECT domain, rank, searched FROM results_tracked ORDER BY rank')).toEqual([
      { domain: bare(first.domain), rank: first.rank, searched: 30 },
      { domain: bare(third.domain), rank: third.rank, searched: 30 },
    ]);

    const missing = await runOn(sim, pipeline(dir.path('missing.sqlite'), ['grinder'], { track: { domains: ['never-ranked.example', first.domain] }, refresh: { depth: 'until-found', margin: 1 } }));
    expect(missing.series.byReason).toEqual({ max_pages: 1 });
    expect(pagesByQuery(sim).get('grinder')).toBe(5);
    const rows = sqliteRows(dir.path('missing.sqlite'), 'SELECT domain, rank, searched, found, position FROM report_tracked ORDER BY domain');
    const truth = sim.rankOf({ q: 'grinder', country: 'us', lang: 'en' }, first.domain);
    expect(rows).toEqual(
      [
        { domain: 'never-ranked.example', rank: null, searched: 50, found: 0, position: 'not found within 50' },
        { domain: bare(first.domain), rank: truth !== null && truth <= 50 ? truth : null, searched: 50, found: truth !== null && truth <= 50 ? 1 : 0, position: truth !== null && truth <= 50 ? String(truth) : 'not found within 50' },
      ].sort((a, b) => (a.domain < b.domain ? -1 : 1)),
    );
    // The report shows it, and export reads the view.
    const html = await renderReport({ database: dir.path('missing.sqlite') });
    expect(html).toContain('<h2>Tracked domains</h2>');
    expect(html).toContain('<td>never-ranked.example</td><td>not found within 50</td>');
    await exportReport({ database: dir.path('missing.sqlite'), report: 'tracked', format: 'csv', out: dir.path('tracked.csv') });
    expect(csvRows(dir.path('tracked.csv')).map((row) => [row.domain, row.position])).toEqual(rows.map((row) => [row.domain, row.position]));
  });

  it('depth full keeps the ranks and pages every series as before', async () => {
    await using sim = await simulator({ seed: 11, day: DAY });
    using dir = workdir();
    const { domain, rank } = domainOnPage(sim, 'espresso', 1);
    const summary = await runOn(sim, pipeline(dir.path('out.sqlite'), ['espresso'], { track: { domains: [domain] } }));
    expect(summary.series.byReason).toEqual({ max_pages: 1 });
    expect(pagesByQuery(sim).get('espresso')).toBe(5);
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT domain, rank, searched FROM results_tracked')).toEqual([{ domain: bare(domain), rank, searched: 50 }]);
  });

  it('takes each query\'s domains from a column of its queries file; a query with none pages in full', async () => {
    await using sim = await simulator({ seed: 11, day: DAY });
    using dir = workdir();
    const espresso = domainOnPage(sim, 'espresso', 2);
    const k1 = domainOnPage(sim, 'tamper', 1);
    const k3 = domainOnPage(sim, 'tamper', 3, [bare(k1.domain)]);
    writeFileSync(dir.path('keywords.csv'), `keyword,Site\r\nespresso,${otherSpelling(espresso.domain)}\r\ntamper,"${k1.domain}; ${otherSpelling(k3.domain)}"\r\ngrinder,\r\n`);
    const summary = await runOn(sim, {
      name: 'tracked-column',
      source: searchPages({ queriesFile: dir.path('keywords.csv'), countries: ['us'], langs: ['en'], maxPages: 5 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('out.sqlite') })],
      track: { column: 'site' },
      refresh: { depth: 'until-found' },
    });
    expect(summary.series.byReason).toEqual({ found: 2, max_pages: 1 });
    expect(Object.fromEntries(pagesByQuery(sim))).toEqual({ espresso: 2, tamper: 3, grinder: 5 });
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT query, domain, rank, searched FROM results_tracked ORDER BY query, rank')).toEqual([
      { query: 'espresso', domain: bare(espresso.domain), rank: espresso.rank, searched: 20 },
      { query: 'tamper', domain: bare(k1.domain), rank: k1.rank, searched: 30 },
      { query: 'tamper', domain: bare(k3.domain), rank: k3.rank, searched: 30 },
    ]);
  });
});

describe('the state store', () => {
  it('keeps each series\' tracked ranks by run: the history a refresh planner reads, a series not reached left unfetched', async () => {
    await using sim = await simulator({ seed: 11, day: DAY });
    using dir = workdir();
    const { domain } = domainOnPage(sim, 'blender', 2);
    const make = (queries: string[]) => pipeline(dir.path('out.sqlite'), queries, { track: { domains: [domain, 'never-ranked.example'] }, refresh: { depth: 'until-found' } });
    const first = await runOn(sim, make(['blender', 'teapot']));
    sim.setDay(DAY + 20);
    // The second run reaches only one series: its budget is one page.
    const second = await runOn(sim, { ...make(['blender', 'teapot']), budget: { maxCredits: 1 } });
    const db = new Database(dir.path('out.sqlite'));
    const store = sqliteStateStore(db);
    const runIds = (await store.runs('tracked')).map((run) => run.runId);
    expect(runIds).toEqual([first.runId, second.runId]);
    const truth = (day: number) => sim.rankOf({ q: 'blender', country: 'us', lang: 'en' }, domain, day);
    const blender = { id: 'search|blender|us|en', endpoint: '/searchengine/search', query: 'blender', country: 'us', lang: 'en' };
    const history = await trackedHistory(store, runIds, blender, [bare(domain), 'never-ranked.example']);
    expect(history[0]).toEqual({ runId: first.runId, fetched: true, ranks: [{ domain: bare(domain), rank: truth(DAY), searched: 50 }, { domain: 'never-ranked.example', rank: null, searched: 50 }], pages: 5 });
    const teapot = await trackedHistory(store, runIds, { ...blender, id: 'search|teapot|us|en', query: 'teapot' }, ['never-ranked.example']);
    // One of the two series got the second run's one page; the other was not fetched in it.
    expect([history[1]?.fetched, teapot[1]?.fetched].sort()).toEqual([false, true]);
    for (const run of [history[1], teapot[1]]) if (run?.fetched) expect(run.ranks?.every((rank) => rank.searched === 10)).toBe(true);
    db.close();
  });
});

describe('a JSON config', () => {
  it('takes track and refresh as a pipeline file does', async () => {
    await using sim = await simulator({ seed: 11, day: DAY });
    using dir = workdir();
    const { domain, rank } = domainOnPage(sim, 'teapot', 2);
    const config = {
      name: 'tracked-json',
      search: { queries: ['teapot'], countries: ['us'], langs: ['en'], maxPages: 5 },
      sinks: [{ type: 'sqlite', path: dir.path('out.sqlite') }],
      track: { domains: [otherSpelling(domain)] },
      refresh: { depth: 'until-found', margin: 0 },
    };
    const summary = await runOn(sim, pipelineFromConfig(config));
    expect(summary.series.byReason).toEqual({ found: 1 });
    expect(pagesByQuery(sim).get('teapot')).toBe(2);
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT domain, rank, searched FROM results_tracked')).toEqual([{ domain: bare(domain), rank, searched: 20 }]);
    expectRefused(await thrown(() => pipelineFromConfig({ ...config, refresh: { depth: 'until-found', margin: 'one' } })), 'refresh.margin', /whole number/);
  });

  it('with a bad field is refused by the command line, exit 2, before a request', async () => {
    await using sim = await simulator({ seed: 11, day: DAY });
    using dir = workdir();
    const file = config(dir.dir, { track: { domains: ['example.com/shop'] }, refresh: { depth: 'until-found', margin: -1 } });
    const result = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/track\.domains\.0: must be a host name/);
    expect(result.stderr).toMatch(/refresh\.margin: must be a whole number/);
    expect(sim.stats().requests).toBe(0);
  });
});

describe('a series found, killed and resumed', () => {
  for (const [point, n] of [['after-commit', 1], ['page-transaction', 2]] as const) {
    it(`fetches no more than its margin after the page it was found on (SIGKILL at ${point} #${n})`, async () => {
      await using sim = await simulator({ seed: 11, day: DAY });
      using dir = workdir();
      const { domain, rank } = domainOnPage(sim, 'espresso', 1);
      const spec = { baseUrl: sim.url, dir: dir.dir, queries: ['espresso'], maxPages: 5, concurrency: 1, sinks: ['sqlite'], track: { domains: [domain] }, refresh: { depth: 'until-found', margin: 2 } };
      const killed = await runChild(spec, { WEBDATA_CRASH_AT: `${point}:${n}` }).done;
      expect(killed.signal).toBe('SIGKILL');
      // Other domains would decide other pages and ranks: the run is not resumed with them (a RunLifecycleError, exit 2
      // from the command line; the fixture exits 1 on any error), and nothing is sent.
      const before = sim.stats().requests;
      const refused = await runChild({ ...spec, track: { domains: ['other.example'] } }).done;
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/ERROR RunLifecycleError: .*other terms.*tracked domains: .*other\.example/);
      expect(sim.stats().requests).toBe(before);
      const resumed = await runChild(spec).done;
      expect(resumed.code).toBe(0);
      expect(resumed.summary?.series.byReason).toEqual({ found: 1 });
      // Found on page 1, margin 2: pages 1 to 3, the page killed inside its transaction paid twice.
      expect(pagesByQuery(sim).get('espresso')).toBe(point === 'page-transaction' ? 4 : 3);
      expect(sqliteRows(dir.path('out.sqlite'), 'SELECT query, domain, rank, searched FROM results_tracked')).toEqual([{ query: 'espresso', domain: bare(domain), rank, searched: 30 }]);
      expect(sqliteRows(dir.path('out.sqlite'), 'SELECT COUNT(DISTINCT page) AS pages FROM results')).toEqual([{ pages: 3 }]);
    });
  }
});

describe('a tracking config that cannot work', () => {
  const base = (extra: Record<string, unknown>, source = searchPages({ queries: ['espresso'], maxPages: 2 })) => ({
    name: 'bad-track',
    source,
    stages: [normalize()],
    sinks: [toSqlite({ path: '/nonexistent/never-written.sqlite' })],
    ...extra,
  });

  it('is refused naming the field and what is valid, before a request is sent (exit 2)', async () => {
    await using sim = await simulator({ seed: 11, day: DAY });
    const refused = async (extra: Record<string, unknown>, field: string, reason: RegExp, source?: ReturnType<typeof searchPages>) => {
      const error = await thrown(() => run(base(extra, source) as never, { baseUrl: sim.url, apiKey: TEST_KEY, env: {} }));
      expectRefused(error, field, reason);
      expect(exitCodeFor({ error })).toBe(2);
    };
    await refused({ track: { domains: [] } }, 'track.domains', /at least one domain/);
    await refused({ track: { domains: ['https://example.com/page'] } }, 'track.domains.0', /host name such as example.com/);
    await refused({ track: { domains: ['example.com'], column: 'site' } }, 'track', /domains .* or column .*one of them/);
    await refused({ track: {} }, 'track', /one of them/);
    await refused({ refresh: { depth: 'until-found' } }, 'refresh.depth', /needs tracked domains/);
    await refused({ track: { domains: ['example.com'] }, refresh: { depth: 'until-found', margin: -1 } }, 'refresh.margin', /whole number/);
    await refused({ track: { domains: ['example.com'] }, refresh: { depth: 'until-found', margin: 1.5 } }, 'refresh.margin', /whole number/);
    await refused({ track: { domains: ['example.com'] }, refresh: { depth: 'deep' } }, 'refresh.depth', /"full" or "until-found"/);
    await refused({ track: { column: 'site' } }, 'track.column', /not a column of the queries file/);
    await refused({ track: { domains: ['example.com'] }, stages: [] }, 'track', /normalize\(\) stage/);
    await refused({ track: { domains: ['example.com'] }, stages: [normalize(), dedupe({ scope: 'global' })] }, 'track', /dedupe wider than the series/);
    expect(sim.stats().requests).toBe(0);
  });

  it('a column cell that is not host names, and a source with no queries, are refused too', async () => {
    await using sim = await simulator({ seed: 11, day: DAY });
    using dir = workdir();
    writeFileSync(dir.path('keywords.csv'), 'keyword,site\r\nespresso,example.com/shop\r\n');
    const source = searchPages({ queriesFile: dir.path('keywords.csv'), maxPages: 2 });
    const error = await thrown(() => run(base({ track: { column: 'site' } }, source) as never, { baseUrl: sim.url, apiKey: TEST_KEY, env: {} }));
    expectRefused(error, 'track.column', /"espresso" has "example.com\/shop" in "site"/);
    const endpointOnly = await thrown(() => run(base({ track: { domains: ['example.com'] } }, endpointPages({ path: '/reviews', params: [{ id: '1' }] }) as never) as never, { baseUrl: sim.url, apiKey: TEST_KEY, env: {} }));
    expectRefused(endpointOnly, 'track', /needs a search source/);
    expect(sim.stats().requests).toBe(0);
  });
});
