import { PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace';
import { UsageError } from '../errors/usage-error.ts';
import type { OtlpOptions, OtlpProtocol, TraceOptions } from './metrics-options.ts';

/**
 * A reader that exports the run's metrics over OTLP every OTEL_METRIC_EXPORT_INTERVAL, with the exporter package of
 * the protocol asked for. The exporters are optional peer dependencies (docs/observability.md, "OTLP export from the
 * command line"): a run that exports nothing does not install them. The exporter reads its own variables
 * (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION, their _METRICS_ forms, the temporality preference).
 */
export async function otlpReader(options: OtlpOptions): Promise<PeriodicExportingMetricReader> {
  const Exporter = await exporterClass<PushMetricExporter>(options, 'OTLPMetricExporter', 'the metrics', 'OTEL_METRICS_EXPORTER=none');
  return new PeriodicExportingMetricReader({ exporter: new Exporter(), exportIntervalMillis: options.intervalMs, exportTimeoutMillis: options.timeoutMs });
}

/**
 * The run's spans, batched to the OTLP trace exporter of the protocol asked for (an optional peer dependency too). The
 * exporter reads its own variables (the endpoint, headers, timeout, their _TRACES_ forms); the batch its OTEL_BSP_*.
 */
export async function otlpSpanProcessor(options: TraceOptions): Promise<BatchSpanProcessor> {
  const Exporter = await exporterClass<SpanExporter>(options, 'OTLPTraceExporter', 'the spans', 'OTEL_TRACES_EXPORTER=none');
  return new BatchSpanProcessor({ exporter: new Exporter() });
}

/** The exporter class `name` of the package, or a UsageError that says how to install it or do without. */
async function exporterClass<E>(options: { package: string; protocol: OtlpProtocol; protocolFrom: string }, name: string, what: string, without: string): Promise<new () => E> {
  let loaded: unknown;
  try {
    loaded = await import(options.package);
  } catch (error) {
    // Only the package itself missing is ours to explain; a package that fails to load says why on its own.
    const code = (error as { code?: unknown }).code;
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String((error as Error).message).includes(options.package)) {
      throw new UsageError(
        `OTLP export of ${what} (${options.protocolFrom}) needs ${options.package}, which is not installed: ` +
          `npm install ${options.package} beside webdata-etl, choose another protocol with OTEL_EXPORTER_OTLP_PROTOCOL ` +
          `(${options.protocol === 'http/json' ? 'http/protobuf' : 'http/json'}, …), or set ${without}`,
      );
    }
    throw error;
  }
  const exporter = (loaded as Record<string, unknown>)[name];
  if (typeof exporter !== 'function') throw new UsageError(`${options.package} has no ${name}: install a version from 0.300 to 0.399`);
  return exporter as new () => E;
}
