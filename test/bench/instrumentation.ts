// (p) The cost of the run's OpenTelemetry instrumentation (issue 31; docs/observability.md) on the local path: the
// end-to-end pipeline (search → normalize → dedupe → SQLite, zero-latency simulator) run alternately with no SDK
// registered (the API's no-ops: what every user pays) and with the SDK registered — a MeterProvider collecting every
// second and a TracerProvider batching every span to an exporter that drops them (what a user with a Prometheus
// endpoint or an OTLP exporter pays, but the network) — in the same process, on the same items.
// Without an SDK the cost is too small to see in a run's time: it is measured directly, as the time of the no-op
// calls a run makes per event, against the run's time per event.
// `node test/bench/instrumentation.ts [queries] [rounds]`, or as part of `npm run bench`.
import { join } from 'node:path';
import { metrics, trace } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter, TracerProvider } from '@opentelemetry/sdk-trace';
import { dedupe, definePipeline, normalize, run, type RunEvent, searchPages, toSqlite } from '../../src/index.ts';
import { runMetrics } from '../../src/run/run-metrics.ts';
import { runSpans } from '../../src/run/run-spans.ts';
import { CONCURRENCY, log, PAGES_PER_QUERY, PER_PAGE, perSecond, queryList, ratio, setUp, timed } from './throughput.ts';

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
};

/** One end-to-end run into a fresh database; its items served per second and the events it emitted. */
async function oneRun(env: Awaited<ReturnType<typeof setUp>>, queries: string[], round: string): Promise<{ itemsPerSecond: number; events: number }> {
  let events = 0;
  const { value, ms } = await timed(() =>
    run(
      definePipeline({
        name: `bench-otel-${round}`,
        source: searchPages({ queries, maxPages: PAGES_PER_QUERY, count: PER_PAGE }),
        stages: [normalize(), dedupe()],
        sinks: [toSqlite({ path: join(env.dir, `otel-${round}.sqlite`) })],
        rate: { concurrency: CONCURRENCY },
      }),
      { baseUrl: env.url, apiKey: env.apiKey, env: {}, onEvent: () => void (events += 1) },
    ),
  );
  return { itemsPerSecond: perSecond(value.items.served, ms), events };
}

/** Spans counted and dropped: the SDK's work without an exporter's network. */
class DroppingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    this.spans += spans.length;
    done({ code: 0 });
  }
  async shutdown(): Promise<void> {}
}

/**
 * Nanoseconds per event of the instrumentation (metrics and spans), on a run's mix of events: with no SDK the no-op
 * calls alone; with the SDK, the same calls recording (spans batched and dropped). A direct figure of the CPU it
 * takes, where a run's throughput varies more than that between identical runs on a shared machine.
 */
async function nanosPerEvent(withSdk: boolean): Promise<number> {
  const meters = withSdk ? new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 1000 })] }) : undefined;
  const tracers = withSdk ? new TracerProvider({ spanProcessors: [new BatchSpanProcessor({ exporter: new DroppingExporter() })] }) : undefined;
  if (meters) metrics.setGlobalMeterProvider(meters);
  if (tracers) trace.setGlobalTracerProvider(tracers);
  try {
    const { record: measure } = runMetrics('bench-events');
    const spans = runSpans('bench-events');
    const series = 1000;
    // A series' life: its start, a page's request, answer and commit, its end.
    const life = (n: number): RunEvent[] => {
      const id = `s${n}`;
      return [
        { type: 'series_start', series: id, endpoint: '/searchengine/search', query: 'q', country: 'us', lang: 'en', resumed: false },
        { type: 'request', series: id, path: '/searchengine/search', attempt: 1, page: 1 },
        { type: 'response', series: id, path: '/searchengine/search', attempt: 1, status: 200, latencyMs: 3, credits: 1, uncertain: false },
        { type: 'page', key: `${id}:1`, series: id, number: 1, items: 100, served: 100, duplicates: 2, commitMs: 1 },
        { type: 'series', series: id, reason: 'max_pages', pages: 1 },
      ] as RunEvent[];
    };
    const events = Array.from({ length: series }, (_, n) => life(n)).flat();
    const record = (event: RunEvent) => {
      measure(event);
      spans.observe(event);
    };
    for (const event of events.slice(0, 500)) record(event);
    const started = process.hrtime.bigint();
    for (const event of events) record(event);
    return Number(process.hrtime.bigint() - started) / events.length;
  } finally {
    if (meters) {
      metrics.disable();
      await meters.shutdown();
    }
    if (tracers) {
      trace.disable();
      await tracers.shutdown();
    }
  }
}

export async function scenarioInstrumentation(queryCount: number, rounds: number) {
  const planned = queryCount * PAGES_PER_QUERY * PER_PAGE;
  log(`(p) instrumentation: ${planned} items end to end, ${rounds} rounds each with no SDK and with the SDK (metrics collected every 1 s, every span batched), alternating`);
  const env = await setUp();
  const queries = queryList(queryCount);
  const without: number[] = [];
  const withSdk: number[] = [];
  let eventsPerRun = 0;
  let spansPerRun = 0;
  let runMs = 0;
  try {
    // A first run warms the JIT and the simulator's caches; not counted.
    await oneRun(env, queries, 'warm');
    for (let round = 0; round < rounds; round++) {
      const bare = await oneRun(env, queries, `none-${round}`);
      without.push(bare.itemsPerSecond);
      eventsPerRun = bare.events;
      runMs = (planned / bare.itemsPerSecond) * 1000;
      const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
      const meters = new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 1000 })] });
      const dropping = new DroppingExporter();
      const tracers = new TracerProvider({ spanProcessors: [new BatchSpanProcessor({ exporter: dropping })] });
      metrics.setGlobalMeterProvider(meters);
      trace.setGlobalTracerProvider(tracers);
      try {
        withSdk.push((await oneRun(env, queries, `sdk-${round}`)).itemsPerSecond);
        await tracers.forceFlush();
        spansPerRun = dropping.spans;
      } finally {
        metrics.disable();
        trace.disable();
        await meters.shutdown();
        await tracers.shutdown();
      }
    }
  } finally {
    await env.close();
  }
  const nanos = await nanosPerEvent(false);
  const sdkNanos = await nanosPerEvent(true);
  const share = (perEvent: number) => Math.round(((perEvent * eventsPerRun) / (runMs * 1e6)) * 1e6) / 1e6;
  return {
    items: planned,
    rounds,
    spansPerRun,
    itemsPerSecond: { noSdk: without, sdk: withSdk },
    medianItemsPerSecond: { noSdk: median(without), sdk: median(withSdk) },
    // Below 1: the SDK costs that share of the throughput (aim: under 3 %, i.e. above 0.97).
    sdkOverNoSdk: ratio(median(withSdk), median(without)),
    // The CPU the calls take per event, against the run's time per event (its wall time over its events).
    noSdk: { nanosPerEvent: Math.round(nanos), eventsPerRun, shareOfRunTime: share(nanos) },
    sdk: { nanosPerEvent: Math.round(sdkNanos), eventsPerRun, shareOfRunTime: share(sdkNanos) },
  };
}

if (import.meta.main) {
  const queries = Number(process.argv[2] ?? 200);
  const rounds = Number(process.argv[3] ?? 5);
  process.stdout.write(`${JSON.stringify(await scenarioInstrumentation(queries, rounds), null, 2)}\n`);
}
