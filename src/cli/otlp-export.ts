import { PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { UsageError } from '../errors/usage-error.ts';
import type { OtlpOptions } from './metrics-options.ts';

/**
 * A reader that exports the run's metrics over OTLP every OTEL_METRIC_EXPORT_INTERVAL, with the exporter package of
 * the protocol asked for. The exporters are optional peer dependencies (docs/observability.md, "OTLP export from the
 * command line"): a run that exports nothing does not install them. The exporter reads its own variables
 * (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION, their _METRICS_ forms, the temporality preference).
 */
export async function otlpReader(options: OtlpOptions): Promise<PeriodicExportingMetricReader> {
  const exporter = new (await exporterClass(options))();
  return new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: options.intervalMs, exportTimeoutMillis: options.timeoutMs });
}

type ExporterClass = new () => PushMetricExporter;

async function exporterClass(options: OtlpOptions): Promise<ExporterClass> {
  let loaded: unknown;
  try {
    loaded = await import(options.package);
  } catch (error) {
    // Only the package itself missing is ours to explain; a package that fails to load says why on its own.
    const code = (error as { code?: unknown }).code;
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String((error as Error).message).includes(options.package)) {
      throw new UsageError(
        `OTLP export of the metrics (${options.protocolFrom}) needs ${options.package}, which is not installed: ` +
          `npm install ${options.package} beside webdata-etl, choose another protocol with OTEL_EXPORTER_OTLP_PROTOCOL ` +
          `(${options.protocol === 'http/json' ? 'http/protobuf' : 'http/json'}, …), or set OTEL_METRICS_EXPORTER=none`,
      );
    }
    throw error;
  }
  const exporter = (loaded as { OTLPMetricExporter?: unknown }).OTLPMetricExporter;
  if (typeof exporter !== 'function') throw new UsageError(`${options.package} has no OTLPMetricExporter: install a version from 0.300 to 0.399`);
  return exporter as ExporterClass;
}
