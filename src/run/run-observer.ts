import { type RunGauges, runMetrics } from './run-metrics.ts';
import { runSpans } from './run-spans.ts';
import type { RunEvent, RunOptions } from './run-types.ts';
import type { RunSummary } from './summary.ts';

/** What observes a run, made once as it starts: its metrics, its spans and the caller's `onEvent`, hearing one stream. */
export interface RunObserver {
  /** One event of the run, to all of them: a function of its own, handed to whatever emits. */
  readonly emit: (event: RunEvent) => void;
  /** Reports the run's gauges from now: after `start`, which names a distributed run's worker they come from. */
  watch(gauges: RunGauges): void;
  /** The run ended: its span takes the summary's numbers. Returns the summary. */
  ended(summary: RunSummary): RunSummary;
  /** The run failed: its span records the error. Returns the error. */
  failed(error: unknown): unknown;
  /** However the run ended: its gauges hold its final figures (docs/observability.md). */
  close(): void;
}

/**
 * The run's observer (docs/observability.md): every event reaches the run's metrics (a no-op until an application
 * registers an OpenTelemetry SDK), its spans, and the caller. Made before run() first awaits: the spans' parent is
 * the caller's context as it is then.
 */
export function runObserver(pipeline: string, options: Pick<RunOptions, 'onEvent' | 'telemetry'>): RunObserver {
  const measure = runMetrics(pipeline);
  const spans = runSpans(pipeline, options.telemetry);
  let freeze: (() => void) | undefined;
  return {
    emit(event) {
      measure.record(event);
      spans.observe(event);
      options.onEvent?.(event);
    },
    watch(gauges) {
      freeze = measure.observe(gauges);
    },
    ended: (summary) => spans.ended(summary),
    failed: (error) => spans.failed(error),
    close() {
      freeze?.();
      freeze = undefined;
    },
  };
}
