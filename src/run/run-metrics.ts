import { metrics } from '@opentelemetry/api';
import { VERSION } from '../version.ts';
import type { RunEvent } from './run-types.ts';

/**
 * A run's OpenTelemetry metrics (docs/observability.md), taken from the same events as its progress and summary, so
 * that they agree with them. `@opentelemetry/api` does nothing until an application registers an SDK: then these reach
 * whatever it exports to. Attributes: the pipeline, the endpoint, the status — never the key, never a query's text.
 */
export function runMetrics(pipeline: string): (event: RunEvent) => void {
  // Taken per run: an SDK registered after the package was loaded, before the run, is the one they report to.
  const meter = metrics.getMeter('webdata-etl', VERSION);
  const requests = meter.createCounter('webdata_etl.requests', { description: 'Requests answered (or failed without an answer), by status class', unit: '{request}' });
  const duration = meter.createHistogram('webdata_etl.request.duration', { description: 'Time from sending a request to its answer', unit: 's' });
  const credits = meter.createCounter('webdata_etl.credits.spent', { description: 'Credits counted as spent, the uncertain ones included', unit: '{credit}' });
  const uncertain = meter.createCounter('webdata_etl.credits.uncertain', { description: 'Credits counted as spent without certainty (a timeout or reset after sending)', unit: '{credit}' });
  const retries = meter.createCounter('webdata_etl.retries', { description: 'Attempts sent again, by reason', unit: '{request}' });
  const pauses = meter.createCounter('webdata_etl.pause.duration', { description: 'Time the run paused for the rate limit', unit: 's' });
  const pages = meter.createCounter('webdata_etl.pages.committed', { description: 'Pages committed', unit: '{page}' });
  const written = meter.createCounter('webdata_etl.items.written', { description: 'Items committed to the sinks', unit: '{item}' });
  const duplicates = meter.createCounter('webdata_etl.items.duplicates', { description: 'Items dropped as duplicates', unit: '{item}' });
  const series = meter.createCounter('webdata_etl.series.ended', { description: 'Series that ended in this invocation, by reason', unit: '{series}' });
  const rate = meter.createGauge('webdata_etl.rate.paced', { description: 'Requests a second the run paces itself to', unit: '{request}/s' });
  const base = { 'webdata_etl.pipeline': pipeline };
  return (event) => {
    switch (event.type) {
      case 'response': {
        const at = { ...base, 'webdata_etl.endpoint': event.path };
        requests.add(1, { ...at, 'webdata_etl.status': statusClass(event.status) });
        duration.record(event.latencyMs / 1000, at);
        if (event.credits > 0) credits.add(event.credits, at);
        if (event.uncertain && event.credits > 0) uncertain.add(event.credits, at);
        return;
      }
      case 'retry':
        return retries.add(1, { ...base, 'webdata_etl.endpoint': event.path, 'webdata_etl.reason': event.reason });
      case 'pause':
        return pauses.add(event.ms / 1000, { ...base, 'webdata_etl.reason': event.reason });
      case 'adapt':
        return rate.record(event.rate, base);
      case 'series':
        return series.add(1, { ...base, 'webdata_etl.reason': event.reason });
      case 'page':
        pages.add(1, base);
        written.add(event.items, base);
        if (event.duplicates > 0) duplicates.add(event.duplicates, base);
        return;
      default:
        return;
    }
  };
}

/** A status as a class few enough to chart: 2xx, 5xx, each 4xx by its code (429, 402, 403 mean different things), network. */
function statusClass(status: number | string): string {
  if (typeof status !== 'number') return 'network';
  if (status >= 200 && status < 300) return '2xx';
  if (status >= 500) return '5xx';
  return String(status);
}
