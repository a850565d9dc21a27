// An OpenTelemetry SDK registered by a test, as an application registers one, with a reader the test collects from
// when it wants; and what a collection holds, by metric name.
import { metrics } from '@opentelemetry/api';
import { type DataPoint, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';

/** A reader the test collects from when it wants (the SDK's own, with nothing to flush or shut). */
class CollectingReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

export type Attributes = DataPoint<number>['attributes'];

/** Registers a MeterProvider for the test: `collect()` reads it; `unregister()` (in a finally) takes it away. */
export function registeredMeters() {
  const reader = new CollectingReader();
  const provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
  return {
    async collect() {
      const { resourceMetrics } = await reader.collect();
      const all = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
      const found = (name: string) => all.find((metric) => metric.descriptor.name === name);
      const points = (name: string) => (found(name)?.dataPoints ?? []) as DataPoint<number>[];
      return {
        all,
        points,
        /** A metric's values, or undefined when nothing reported it. */
        values: (name: string) => (found(name)?.dataPoints as DataPoint<number>[] | undefined)?.map((point) => point.value),
        sum: (name: string, where: (attributes: Attributes) => boolean = () => true) =>
          points(name)
            .filter((point) => where(point.attributes))
            .reduce((total, point) => total + point.value, 0),
      };
    },
    async unregister() {
      metrics.disable();
      await provider.shutdown();
    },
  };
}
