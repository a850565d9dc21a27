import { once } from 'node:events';
import { format } from 'node:util';
import { type DiagLogger, DiagLogLevel, diag, metrics, trace } from '@opentelemetry/api';
import { defaultResource, detectResources, envDetector, type Resource, resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, type MetricReader } from '@opentelemetry/sdk-metrics';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { UsageError } from '../errors/usage-error.ts';
import { VERSION } from '../version.ts';
import { type MetricsEndpoint, serveMetrics } from './metrics-endpoint.ts';
import type { MetricsSetup } from './metrics-options.ts';
import { otlpReader, otlpSpanProcessor } from './otlp-export.ts';
import { nextSignal } from './signals.ts';

/** Where the command line's telemetry speaks: its progress reporter. */
export interface TelemetryOutput {
  log(text: string): void;
  metricsEndpoint(url: string): void;
}

/** The OpenTelemetry SDK of a command-line run: what it serves and exports, and its end. */
export interface RunTelemetry {
  /** After the run, its summary written: the last export, the wait for a last scrape, then nothing left open. */
  finish(options: { linger: boolean }): Promise<void>;
}

/**
 * Registers a MeterProvider on this thread, the run's own, before the run starts: `runMetrics` takes its meter from
 * the global provider when the run starts, and a provider is per thread. Its readers are the /metrics endpoint and
 * an OTLP exporter, each when asked for; a TracerProvider batching the run's spans to OTLP, when asked for. This module is loaded with import() only then: a run without them loads no
 * SDK. Throws a UsageError, with nothing left open, when the endpoint cannot listen or an exporter is missing.
 */
export async function startTelemetry(setup: MetricsSetup, out: TelemetryOutput): Promise<RunTelemetry> {
  // The SDK says its problems (an export that failed) through diag, which says nothing until given a logger.
  diag.setLogger(diagTo(out.log), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  // Loaded before anything listens: a missing exporter package is said with nothing to undo.
  const otlp = setup.otlp ? await otlpReader(setup.otlp) : undefined;
  const spans = setup.traces ? await otlpSpanProcessor(setup.traces) : undefined;
  const endpoint = setup.endpoint ? await serveMetrics(setup.endpoint) : undefined;
  const readers: MetricReader[] = [...(endpoint ? [endpoint.reader] : []), ...(otlp ? [otlp] : [])];
  const resource = runResource();
  const provider = new MeterProvider({ resource, readers });
  const tracers = spans ? new TracerProvider({ resource, spanProcessors: [spans] }) : undefined;
  // A provider of the pipeline file's own, registered first, wins: ours would then report nothing.
  const registered = (readers.length === 0 || metrics.setGlobalMeterProvider(provider)) && (!tracers || trace.setGlobalTracerProvider(tracers));
  if (!registered) {
    await provider.shutdown();
    await tracers?.shutdown();
    await endpoint?.close();
    metrics.disable();
    trace.disable();
    diag.disable();
    throw new UsageError(
      'the metrics or spans cannot be served or exported: an OpenTelemetry provider is already registered on the run\'s thread ' +
        '(by the pipeline file?); register your exporter there, or drop --metrics-port and the OTEL_* variables',
    );
  }
  if (endpoint) out.metricsEndpoint(endpoint.url);
  const lingerMs = setup.endpoint?.lingerMs ?? 0;
  return {
    async finish({ linger }) {
      try {
        if (endpoint && linger && lingerMs > 0) {
          // The OTLP receiver gets the final figures before the wait, whatever ends it (shutdown exports them again).
          if (otlp) await provider.forceFlush();
          await lastScrape(endpoint, lingerMs, out);
        }
        // Shutting the providers down is the OTLP reader's last export and the spans' last batch: the process may
        // exit once they resolve.
        await provider.shutdown();
        await tracers?.shutdown();
      } catch (error) {
        // The run is over and its summary written: nothing here may change its exit code.
        out.log(`metrics: ${error instanceof Error ? error.message : String(error)}`);
      } finally {
        await endpoint?.close();
        metrics.disable();
        trace.disable();
        diag.disable();
      }
    },
  };
}

/**
 * The wait after the run (docs/observability.md, "The last scrape"): until a scrape that arrived after the end has
 * been answered, `lingerMs` has passed, or a signal (Ctrl-C) comes, whichever is first. A scraper polling every few
 * seconds thus reads the final figures, and the process does not wait for one that never comes.
 */
async function lastScrape(endpoint: MetricsEndpoint, lingerMs: number, out: TelemetryOutput): Promise<void> {
  const scraped = endpoint.nextScrape();
  out.log(`metrics: waiting up to ${lingerMs / 1000}s for a scrape of the final figures at ${endpoint.url} (Ctrl-C ends the wait)`);
  const signal = nextSignal();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([scraped, new Promise<void>((resolve) => (timer = setTimeout(resolve, lingerMs))), once(signal.signal, 'abort')]);
  } finally {
    clearTimeout(timer);
    signal.dispose();
  }
}

/**
 * The resource every metric is reported with: service.name webdata-etl and its version, under what
 * OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say (the environment wins, as OpenTelemetry users expect). No host
 * or process detector: the process's command line and environment are nobody's business at a scraper.
 */
function runResource(): Resource {
  return defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'webdata-etl', 'service.version': VERSION }))
    .merge(detectResources({ detectors: [envDetector] }));
}

/** The SDK's warnings and errors as the run's log lines; its chatter below that stays unsaid. */
function diagTo(log: (text: string) => void): DiagLogger {
  const say = (message: string, ...args: unknown[]) => log(`opentelemetry: ${plain(format(message, ...args.map((arg) => (arg instanceof Error ? arg.message : arg))))}`);
  const quiet = () => undefined;
  return { error: say, warn: say, info: quiet, debug: quiet, verbose: quiet };
}

/** The SDK's error handler hands an error over as JSON with its stack: its message is what a reader needs. */
function plain(message: string): string {
  if (!message.startsWith('{')) return message;
  try {
    const parsed = JSON.parse(message) as { message?: unknown };
    return typeof parsed.message === 'string' ? parsed.message : message;
  } catch {
    return message;
  }
}
