// A run's OpenTelemetry metrics (issue 31, first step): what an application's SDK receives agrees with the run's
// summary and with the server's own count, and carries neither the key nor a query's text.
import { describe, expect, it } from 'vitest';
import { dedupe, normalize, type NormalizedItem, searchPages, type Stage, toSqlite } from '../../src/index.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { registeredMeters } from './otel-metrics.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

describe('a run\'s OpenTelemetry metrics, with an SDK registered by the application', () => {
  it('requests, credits, pages and items agree with the summary and the server; no key, no query text', async () => {
    const meters = registeredMeters();
    try {
      // 5xx answers too, retried: they are requests, and not spent.
      await using sim = await simulator({ seed: 5, faults: { serverErrorRate: 0.2 } });
      using dir = workdir();
      const summary = await runOn(sim, {
        name: 'measured',
        source: searchPages({ queries: ['secret espresso query', 'secret kettle query'], countries: ['us', 'gb'], maxPages: 3 }),
        stages: [normalize(), dedupe()],
        sinks: [toSqlite({ path: dir.path('out.sqlite') })],
        retry: { attempts: 8, baseDelayMs: 1, maxDelayMs: 5 },
      });
      expect(summary.status).toBe('completed');

      const { all, points, sum } = await meters.collect();

      expect(sum('webdata_etl.requests')).toBe(summary.requests.total);
      expect(sum('webdata_etl.requests', (at) => at['webdata_etl.status'] === '5xx')).toBeGreaterThan(0);
      expect(sum('webdata_etl.requests', (at) => at['webdata_etl.status'] === '2xx')).toBe(summary.requests.byStatus['200']);
      expect(sum('webdata_etl.credits.spent')).toBe(summary.credits.spent);
      expect(sum('webdata_etl.credits.spent')).toBe(sim.stats().credits.main?.debited);
      expect(sum('webdata_etl.retries')).toBe(summary.requests.total - summary.pages.fetched);
      expect(sum('webdata_etl.pages.committed')).toBe(summary.pages.fetched);
      expect(sum('webdata_etl.items.written')).toBe(summary.items.written);
      expect(sum('webdata_etl.items.duplicates')).toBe(summary.items.duplicates);
      expect(sum('webdata_etl.series.ended')).toBe(summary.series.total);
      expect(sum('webdata_etl.series.ended', (at) => at['webdata_etl.reason'] === 'max_pages')).toBe(summary.series.byReason.max_pages ?? 0);
      // One commit timed per page committed.
      const commitTimes = all.find((metric) => metric.descriptor.name === 'webdata_etl.commit.duration')?.dataPoints ?? [];
      expect(commitTimes.map((point) => (point.value as { count: number }).count).reduce((a, b) => a + b, 0)).toBe(summary.pages.fetched);
      // One histogram point per endpoint, counting every request.
      const durations = all.find((metric) => metric.descriptor.name === 'webdata_etl.request.duration')?.dataPoints ?? [];
      expect(durations.map((point) => (point.value as { count: number }).count).reduce((a, b) => a + b, 0)).toBe(summary.requests.total);
      // Buckets in seconds, not the SDK's default ones for milliseconds (0, 5, 10, …, 10000).
      expect((durations[0]?.value as { buckets: { boundaries: number[] } }).buckets.boundaries.slice(0, 3)).toEqual([0.005, 0.01, 0.025]);
      expect(points('webdata_etl.requests').every((point) => point.attributes['webdata_etl.pipeline'] === 'measured')).toBe(true);

      const exported = JSON.stringify(all);
      expect(exported).not.toContain(TEST_KEY);
      expect(exported).not.toContain('secret');
    } finally {
      await meters.unregister();
    }
  });

  it('gauges while it runs: budget, spend, pages waiting on a slow stage (backpressure), series paging; its final figures once it ended', async () => {
    const meters = registeredMeters();
    try {
      await using sim = await simulator({ seed: 6 });
      using dir = workdir();
      // The stage holds the third page until the test lets it go: every permit ends up held by a page paid for and not
      // committed, and the series behind them wait for one.
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let reached!: () => void;
      const held = new Promise<void>((resolve) => (reached = resolve));
      let seen = 0;
      const gate: Stage<NormalizedItem> = async function* (pages) {
        for await (const page of pages) {
          seen += 1;
          if (seen === 3) {
            reached();
            await released;
          }
          yield page;
        }
      };
      const running = runOn(sim, {
        name: 'gauged',
        source: searchPages({ queries: ['secret one', 'secret two', 'secret three', 'secret four', 'secret five', 'secret six'], maxPages: 3 }),
        stages: [normalize(), gate],
        sinks: [toSqlite({ path: dir.path('out.sqlite') })],
        rate: { concurrency: 2 },
        budget: { maxCredits: 500 },
      });
      await held;
      const gauges = async () => (await meters.collect()).values;
      // Requests already sent settle (the server answers them); then nothing moves until the stage lets go.
      let read = await gauges();
      for (let tries = 0; tries < 200 && (read('webdata_etl.requests.in_flight')?.[0] !== 0 || read('webdata_etl.pages.held_back')?.[0] === 0); tries++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        read = await gauges();
      }
      expect(read('webdata_etl.budget')).toEqual([500]);
      expect(read('webdata_etl.budget.spent')).toEqual([sim.stats().credits.main?.debited]);
      expect(read('webdata_etl.credits.reserved')).toEqual([0]);
      expect(read('webdata_etl.requests.in_flight')).toEqual([0]);
      // Both permits held by answered pages (the one in the stage, the one behind it), and series waiting for one.
      expect(read('webdata_etl.pages.uncommitted')).toEqual([2]);
      expect(read('webdata_etl.pages.held_back')?.[0]).toBeGreaterThan(0);
      expect(read('webdata_etl.series.active')?.[0]).toBeGreaterThanOrEqual(1);
      // No 429 taught a limit; not a distributed run.
      expect(read('webdata_etl.rate.limit')).toBeUndefined();
      expect(read('webdata_etl.run.workers')).toBeUndefined();
      release();
      const summary = await running;
      expect(summary.status).toBe('completed');
      // Ended, they stay at where it ended (a last scrape reads those), until the pipeline runs again.
      const after = await gauges();
      expect(after('webdata_etl.budget.spent')).toEqual([summary.credits.spent]);
      expect(after('webdata_etl.requests.in_flight')).toEqual([0]);
      expect(after('webdata_etl.pages.uncommitted')).toEqual([0]);
      expect(after('webdata_etl.series.active')).toEqual([0]);
    } finally {
      await meters.unregister();
    }
  });

  it('pauses for the rate limit: their count and seconds equal the run\'s pause events; every 429 counted by its code', async () => {
    const meters = registeredMeters();
    try {
      // A plan of 20 requests a second with a burst of 2, and a pipeline asking for 100: 429s with Retry-After.
      await using sim = await simulator({ seed: 7, keys: [{ key: TEST_KEY, name: 'main', ratePerSecond: 20, burst: 2 }] });
      using dir = workdir();
      const pauses: number[] = [];
      const summary = await runOn(
        sim,
        {
          name: 'paused',
          source: searchPages({ queries: ['secret a', 'secret b', 'secret c'], maxPages: 4 }),
          stages: [normalize()],
          sinks: [toSqlite({ path: dir.path('out.sqlite') })],
          rate: { requestsPerSecond: 100, concurrency: 4 },
        },
        { onEvent: (event) => void (event.type === 'pause' && pauses.push(event.ms)) },
      );
      expect(summary.status).toBe('completed');
      expect(sim.stats().byStatus['429']).toBeGreaterThan(0);
      const { sum } = await meters.collect();
      expect(pauses.length).toBeGreaterThan(0);
      expect(sum('webdata_etl.pauses')).toBe(pauses.length);
      expect(sum('webdata_etl.pause.duration')).toBeCloseTo(pauses.reduce((a, b) => a + b, 0) / 1000, 6);
      expect(sum('webdata_etl.requests', (at) => at['webdata_etl.status'] === '429')).toBe(sim.stats().byStatus['429']);
    } finally {
      await meters.unregister();
    }
  });
});
