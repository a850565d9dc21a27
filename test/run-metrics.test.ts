// A run's OpenTelemetry metrics (issue 31, first step): what an application's SDK receives agrees with the run's
// summary and with the server's own count, and carries neither the key nor a query's text.
import { metrics } from '@opentelemetry/api';
import { type DataPoint, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { describe, expect, it } from 'vitest';
import { dedupe, normalize, searchPages, toSqlite } from '../src/index.ts';
import { simulator, TEST_KEY } from './helpers.ts';
import { runOn, workdir } from './pipeline-helpers.ts';

/** A reader the test collects from when it wants (the SDK's own, with nothing to flush or shut). */
class CollectingReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

describe('a run\'s OpenTelemetry metrics, with an SDK registered by the application', () => {
  it('requests, credits, pages and items agree with the summary and the server; no key, no query text', async () => {
    const reader = new CollectingReader();
    const provider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(provider);
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

      const { resourceMetrics } = await reader.collect();
      const all = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
      const points = (name: string) => (all.find((metric) => metric.descriptor.name === name)?.dataPoints ?? []) as DataPoint<number>[];
      const sum = (name: string, where: (attributes: DataPoint<number>['attributes']) => boolean = () => true) =>
        points(name)
          .filter((point) => where(point.attributes))
          .reduce((total, point) => total + point.value, 0);

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
      // One histogram point per endpoint, counting every request.
      const durations = all.find((metric) => metric.descriptor.name === 'webdata_etl.request.duration')?.dataPoints ?? [];
      expect(durations.map((point) => (point.value as { count: number }).count).reduce((a, b) => a + b, 0)).toBe(summary.requests.total);
      expect(points('webdata_etl.requests').every((point) => point.attributes['webdata_etl.pipeline'] === 'measured')).toBe(true);

      const exported = JSON.stringify(all);
      expect(exported).not.toContain(TEST_KEY);
      expect(exported).not.toContain('secret');
    } finally {
      metrics.disable();
      await provider.shutdown();
    }
  });
});
