import { describe, expect, it } from 'vitest';
import { dedupe, definePipeline, normalize, run, searchPages, toCsv, toSqlite, ValidationError } from '../../src/index.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

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

  it('a budget is one shape, { maxCredits }, from run() to the meter: a bare number is refused naming budget, before any request', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const pipeline = { name: 'budgeted', source: searchPages({ queries: ['x'], maxPages: 3 }), stages: [normalize()], sinks: [toCsv({ path: dir.path('b.csv') })] };
    const error = await runOn(sim, pipeline, { budget: 2 as unknown as { maxCredits: number } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(String(error)).toContain('budget');
    expect(sim.stats().requests).toBe(0);
    const summary = await runOn(sim, pipeline, { budget: { maxCredits: 2 } });
    expect(summary).toMatchObject({ status: 'budget', credits: { spent: 2, budget: 2 } });
  });

  it('bad definitions are refused with the field named', () => {
    expect(() => searchPages({ queries: ['x'], countries: ['uk'] })).toThrow(/search\.countries\.0: .*did you mean "gb"/);
    expect(() => searchPages({ queries: [] })).toThrow(/search\.queries: must hold at least one query/);
    expect(() => searchPages({ queries: ['x'], maxPages: 0, count: -1 })).toThrow(/search\.maxPages[\s\S]*search\.count/);
    expect(() => definePipeline({ name: 'bad name!', source: searchPages({ queries: ['x'] }), sinks: [] })).toThrow(/name:[\s\S]*sinks: needs at least one sink/);
    expect(() => dedupe({ scope: 'planet' } as never)).toThrow(/dedupe\.scope: must be "series", "query" or "global"/);
  });
});
