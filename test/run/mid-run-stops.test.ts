import { describe, expect, it } from 'vitest';
import { normalize, searchPages, toCsv, toSqlite } from '../../src/index.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { csvRows, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

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
