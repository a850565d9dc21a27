// OTLP export from the command line (issue 31 §3): with OpenTelemetry's variables set, a run exports its metrics to
// an OTLP/HTTP receiver (a real one, on a socket of this test's) every OTEL_METRIC_EXPORT_INTERVAL and once more as it
// ends, with the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say; the figures equal the summary's and the
// simulator's, and no payload holds the key or a query's text.
import { once } from 'node:events';
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { RunSummary } from '../../src/run/summary.ts';
import { config, envFor, startCli } from '../cli-helpers.ts';
import { simulator, TEST_KEY, until } from '../helpers.ts';
import { freePort } from '../postgres/pg-cluster.ts';
import { workdir } from '../pipeline-helpers.ts';

/** OTLP's JSON encoding, as much of it as the test reads. */
interface KeyValue {
  key: string;
  value: { stringValue?: string; intValue?: number | string };
}
interface NumberPoint {
  attributes?: KeyValue[];
  asInt?: number | string;
  asDouble?: number;
}
interface OtlpMetric {
  name: string;
  unit?: string;
  sum?: { dataPoints: NumberPoint[]; isMonotonic?: boolean };
  gauge?: { dataPoints: NumberPoint[] };
  histogram?: { dataPoints: unknown[] };
}
interface OtlpSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  kind: number;
  attributes?: KeyValue[];
}
interface TraceRequest {
  resourceSpans: { resource: { attributes: KeyValue[] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}
interface ExportRequest {
  resourceMetrics: { resource: { attributes: KeyValue[] }; scopeMetrics: { scope: { name: string }; metrics: OtlpMetric[] }[] }[];
}

/** An OTLP/HTTP receiver of metrics in JSON: every request it was sent, as received. */
async function otlpReceiver() {
  const received: { path: string; contentType: string; body: string }[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      received.push({ path: request.url ?? '', contentType: request.headers['content-type'] ?? '', body });
      // An ExportMetricsServiceResponse with nothing rejected.
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    received,
    exports: () => received.filter((one) => one.path === '/v1/metrics').map((one) => JSON.parse(one.body) as ExportRequest),
    spans: () => received.filter((one) => one.path === '/v1/traces').flatMap((one) => (JSON.parse(one.body) as TraceRequest).resourceSpans.flatMap((r) => r.scopeSpans.flatMap((scope) => scope.spans))),
    traceResources: () => received.filter((one) => one.path === '/v1/traces').flatMap((one) => (JSON.parse(one.body) as TraceRequest).resourceSpans.map((r) => r.resource)),
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const numberOf = (point: NumberPoint) => Number(point.asInt ?? point.asDouble ?? 0);
const attribute = (attributes: KeyValue[] | undefined, key: string) => attributes?.find((one) => one.key === key)?.value.stringValue;

describe('webdata-etl run with OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  it('exports to an OTLP/HTTP JSON receiver every interval and at the end: the summary\'s figures, the environment\'s resource, no secret', async () => {
    await using receiver = await otlpReceiver();
    await using sim = await simulator();
    sim.inject({ fault: 'status', status: 503, times: 2 });
    using dir = workdir();
    const file = config(dir.dir, { retry: { attempts: 8, baseDelayMs: 1, maxDelayMs: 5 } }, { queries: ['secret espresso query', 'secret kettle query'], countries: ['us', 'gb'], maxPages: 3 });
    const gate = sim.park();
    const running = startCli(['run', file], {
      cwd: dir.dir,
      env: {
        ...envFor(sim.url),
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_METRIC_EXPORT_INTERVAL: '100',
        OTEL_SERVICE_NAME: 'rank-tracker',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test,team=search',
      },
    });
    // While the run is held in flight, the interval's exports come (with the SDK's default of 60 s they would not).
    await running.whileRunning(gate.reached());
    await running.whileRunning(until(() => receiver.received.length > 0));
    gate.release();
    const result = await running.done;
    expect(result.code, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout) as RunSummary;

    // The metrics, and the run's spans (OTEL_EXPORTER_OTLP_ENDPOINT is for both, as OpenTelemetry's users expect).
    expect(new Set(receiver.received.map((one) => one.path))).toEqual(new Set(['/v1/metrics', '/v1/traces']));
    expect(receiver.received.every((one) => one.contentType.startsWith('application/json'))).toBe(true);
    // Cumulative sums: the last export, made as the process ended, holds the run's final figures.
    const last = receiver.exports().at(-1) as ExportRequest;
    const [resource] = last.resourceMetrics;
    expect(attribute(resource?.resource.attributes, 'service.name')).toBe('rank-tracker');
    expect(attribute(resource?.resource.attributes, 'deployment.environment.name')).toBe('test');
    expect(attribute(resource?.resource.attributes, 'team')).toBe('search');
    expect(attribute(resource?.resource.attributes, 'service.version')).toMatch(/^\d+\.\d+\.\d+$/);
    const metrics = last.resourceMetrics.flatMap((one) => one.scopeMetrics.flatMap((scope) => scope.metrics));
    const sum = (name: string, where: (point: NumberPoint) => boolean = () => true) =>
      metrics
        .filter((metric) => metric.name === name)
        .flatMap((metric) => metric.sum?.dataPoints ?? metric.gauge?.dataPoints ?? [])
        .filter(where)
        .reduce((total, point) => total + numberOf(point), 0);
    expect(metrics.map((metric) => metric.name)).toEqual(expect.arrayContaining(['webdata_etl.requests', 'webdata_etl.credits.spent', 'webdata_etl.request.duration', 'webdata_etl.items.written']));
    expect(sum('webdata_etl.credits.spent')).toBe(summary.credits.spent);
    expect(sum('webdata_etl.credits.spent')).toBe(sim.stats().credits.main?.debited);
    expect(sum('webdata_etl.requests')).toBe(summary.requests.total);
    expect(sum('webdata_etl.requests', (point) => attribute(point.attributes, 'webdata_etl.status') === '5xx')).toBe(2);
    expect(sum('webdata_etl.pages.committed')).toBe(summary.pages.fetched);
    expect(sum('webdata_etl.items.written')).toBe(summary.items.written);

    // Spans: one run, a series each (its parent the run), a request span per page fetched (its parent a series).
    const spans = receiver.spans();
    const named = (name: string) => spans.filter((span) => span.name === name);
    const [runSpan] = named('webdata_etl.run');
    expect(named('webdata_etl.run')).toHaveLength(1);
    expect(named('webdata_etl.series')).toHaveLength(summary.series.total);
    expect(named('webdata_etl.series').every((span) => span.parentSpanId === runSpan?.spanId)).toBe(true);
    const seriesIds = new Set(named('webdata_etl.series').map((span) => span.spanId));
    expect(named('webdata_etl.request')).toHaveLength(summary.pages.fetched);
    expect(named('webdata_etl.request').every((span) => seriesIds.has(span.parentSpanId ?? ''))).toBe(true);
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1);
    expect(attribute(runSpan?.attributes, 'webdata_etl.run.status')).toBe('completed');
    expect(receiver.traceResources().every((resource) => attribute(resource.attributes, 'service.name') === 'rank-tracker')).toBe(true);

    const everything = receiver.received.map((one) => one.body).join('\n');
    expect(everything).not.toContain(TEST_KEY);
    expect(everything).not.toContain('secret');
  });

  it('an export that fails is said on stderr and changes neither the exit code nor the summary', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir);
    // A loopback port nothing listens on: every export is refused, and retried by the exporter until its timeout
    // (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default, which the exporter reads itself).
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const env = { ...envFor(sim.url), OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${nobody}/v1/metrics`, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TIMEOUT: '500' };
    const result = await startCli(['run', file], { cwd: dir.dir, env }).done;
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: 'completed', credits: { spent: sim.stats().credits.main?.debited } });
    expect(result.stderr).toMatch(/^opentelemetry: PeriodicExportingMetricReader: metrics export failed \(error Error: connect ECONNREFUSED 127\.0\.0\.1:\d+\)$/m);
  });
});
