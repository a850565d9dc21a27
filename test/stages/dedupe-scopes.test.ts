import { describe, expect, it } from 'vitest';
import { dedupe, normalize, searchPages, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const pipeline = (path: string, scope: 'series' | 'query' | 'global', persistent = false, queries = ['espresso', 'latte']) => ({
  name: `scope-${scope}${persistent ? '-persistent' : ''}`,
  source: searchPages({ queries, countries: ['us', 'gb', 'de'], maxPages: 2 }),
  stages: [normalize(), dedupe({ scope, persistent })],
  sinks: [toSqlite({ path })],
  rate: { concurrency: 2 },
});

describe('dedupe scopes wider than a series', () => {
  it('query: an item shared by countries is kept once per query; every place it was seen is a sighting', async () => {
    await using sim = await simulator({ seed: 12, resultsPerQuery: 60 });
    using dir = workdir();
    const path = dir.path('q.sqlite');
    const summary = await runOn(sim, pipeline(path, 'query'));
    const perQuery = sqliteRows(path, 'SELECT query, COUNT(*) AS n, COUNT(DISTINCT dedupe_key) AS keys FROM results GROUP BY query');
    for (const row of perQuery) expect(row.n).toBe(row.keys);
    expect(summary.items.duplicates).toBeGreaterThan(0);
    // Sightings: one per keyed item served, new or not; exactly one "first" per (query, key), matching the row kept.
    const sightings = sqliteRows(path, 'SELECT COUNT(*) AS n, SUM(first) AS firsts FROM sightings')[0];
    expect(sightings?.n).toBe(summary.items.served);
    expect(sightings?.firsts).toBe(summary.items.written);
    const shared = sqliteRows(
      path,
      `SELECT s.query, s.dedupe_key, COUNT(DISTINCT s.country) AS countries FROM sightings s GROUP BY s.query, s.dedupe_key HAVING countries > 1 LIMIT 1`,
    )[0];
    expect(shared).toBeDefined();
    expect(sqliteRows(path, `SELECT COUNT(*) AS n FROM results WHERE query = '${shared?.query}' AND dedupe_key = '${String(shared?.dedupe_key).replaceAll("'", "''")}'`)).toEqual([{ n: 1 }]);
    // A finished run's own keys are forgotten: the table stays small.
    expect(sqliteRows(path, 'SELECT COUNT(*) AS n FROM dedupe_keys')).toEqual([{ n: 0 }]);
  });

  it('global: an item is kept once across every query', async () => {
    await using sim = await simulator({ seed: 12 });
    using dir = workdir();
    sim.inject({ fault: 'status', status: 200, body: { data: [{ title: 'everywhere', url: 'https://same.example/' }] } });
    const summary = await runOn(sim, pipeline(dir.path('g.sqlite'), 'global'));
    expect(summary.items).toEqual({ served: 6, written: 1, duplicates: 5, dropped: 0 });
    expect(sqliteRows(dir.path('g.sqlite'), 'SELECT COUNT(*) AS n, SUM(first) AS firsts FROM sightings')).toEqual([{ n: 6, firsts: 1 }]);
  });

  it('persistent: across runs, each run keeps only what no earlier run had', async () => {
    await using sim = await simulator({ seed: 12 });
    using dir = workdir();
    const path = dir.path('p.sqlite');
    const first = await runOn(sim, pipeline(path, 'series', true, ['espresso']));
    const second = await runOn(sim, pipeline(path, 'series', true, ['espresso']));
    expect(first.items.written).toBeGreaterThan(0);
    expect(second.items).toMatchObject({ written: 0, duplicates: second.items.served });
    expect(sqliteRows(path, 'SELECT COUNT(*) AS n FROM dedupe_keys')).toEqual([{ n: first.items.written }]);
    // Sightings of the first run are still there as they were: rows are never rewritten.
    const byRun = sqliteRows(path, 'SELECT run_id, SUM(first) AS firsts, COUNT(*) AS n FROM sightings GROUP BY run_id ORDER BY MIN(rowid)');
    expect(byRun).toEqual([
      { run_id: first.runId, firsts: first.items.written, n: first.items.served },
      { run_id: second.runId, firsts: 0, n: second.items.served },
    ]);
  });

  it('a page’s keys commit with the page: a stop between pages and a resume keep the result of one run', async () => {
    await using sim = await simulator({ seed: 13, resultsPerQuery: 60 });
    using whole = workdir();
    const reference = await runOn(sim, pipeline(whole.path('w.sqlite'), 'global'));
    using dir = workdir();
    const stop = new AbortController();
    let pages = 0;
    const interrupted = await runOn(sim, pipeline(dir.path('i.sqlite'), 'global'), { signal: stop.signal, onEvent: (e) => e.type === 'page' && ++pages === 5 && stop.abort() });
    expect(interrupted.status).toBe('interrupted');
    const resumed = await runOn(sim, pipeline(dir.path('i.sqlite'), 'global'));
    expect(resumed.items).toEqual(reference.items);
  });

  it('needs the runner for wider scopes, and says so', async () => {
    const stage = dedupe({ scope: 'global' });
    const pages = (async function* () {})();
    const ctx = { runId: 'r', pipeline: 'p', signal: new AbortController().signal, seriesState: <T extends object>(_s: string, _x: unknown, init: () => T) => init() };
    await expect(async () => {
      for await (const _ of stage(pages, ctx));
    }).rejects.toThrow(/needs the run's state store/);
  });
});
