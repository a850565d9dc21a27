import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';
import { type OpenTelemetry, registeredOpenTelemetry } from './open-telemetry.ts';
import { SEARCH_PATH } from '../client/client.ts';
import { VERSION } from '../version.ts';
import type { RunEvent } from './run-types.ts';
import type { RunSummary } from './summary.ts';
import { type TelemetryOptions, telemetryOf } from './telemetry-options.ts';

/** A run's spans, as run() drives them: every event, then the summary or the failure. */
export interface RunSpans {
  /** One run event: series and request spans are made from them. */
  observe(event: RunEvent): void;
  /** The run ended: its span takes the summary's numbers and ends. Returns the summary. */
  ended(summary: RunSummary): RunSummary;
  /** The run failed: its span records the error's class (its message only with `queryText`) and ends. Returns the error. */
  failed(error: unknown): unknown;
}

/**
 * A run's OpenTelemetry spans (docs/observability.md#spans): `webdata_etl.run`, a `webdata_etl.series` per series this
 * invocation pages and a `webdata_etl.request` per page requested, made from the run's events as its metrics are
 * (run-metrics.ts), so that they agree with the summary. Each has its parent given explicitly: no context manager is
 * needed, and an application's span active around `run()` is the run's parent. Never the key; a query's text only
 * with `telemetry.queryText`. Until an application registers an SDK (or when its sampler drops the run) the run's span
 * does not record, and nothing else is done.
 */
export function runSpans(pipeline: string, options?: TelemetryOptions): RunSpans {
  const { queryText } = telemetryOf(options);
  // Taken now, while the caller's context is active (run() has not awaited yet); none without a registered context manager.
  const parent = registeredOpenTelemetry()?.context.active();
  const startTime = performance.now();
  let spans: RunSpans | undefined;
  // The span starts (dated from here) at the run's first event or its end, not now: a run refused before that (its
  // client's options) leaves no span open, as one whose pipeline is refused has none. With nothing registered with
  // OpenTelemetry then, the API's tracer would make a span nobody records: nothing is done, and the API not loaded.
  const started = (): RunSpans => {
    if (spans !== undefined) return spans;
    const api = registeredOpenTelemetry();
    spans = api === undefined ? NOBODY : startRun(api, pipeline, parent ?? api.ROOT_CONTEXT, startTime, queryText);
    return spans;
  };
  return {
    observe: (event) => started().observe(event),
    ended: (summary) => started().ended(summary),
    failed: (error) => started().failed(error),
  };
}

/** A run observed by nobody: no OpenTelemetry registered as it began. */
const NOBODY: RunSpans = { observe() {}, ended: (summary) => summary, failed: (error) => error };

function startRun(api: OpenTelemetry, pipeline: string, parent: Context, startTime: number, queryText: boolean): RunSpans {
  // Taken per run: an SDK registered after the package was loaded, before the run, is the one they report to.
  const tracer = api.trace.getTracer('webdata-etl', VERSION);
  const span = tracer.startSpan('webdata_etl.run', { kind: api.SpanKind.INTERNAL, startTime, attributes: { 'webdata_etl.pipeline': pipeline } }, parent);
  if (!span.isRecording()) return unrecorded(span);
  return new RecordedRun(api, tracer, span, api.trace.setSpan(parent, span), queryText);
}

/** A run nobody records: its span is ended all the same (the API asks that of every span), and that is all. */
function unrecorded(span: Span): RunSpans {
  return {
    observe() {},
    ended(summary) {
      span.end();
      return summary;
    },
    failed(error) {
      span.end();
      return error;
    },
  };
}

/** A series being paged: its span, and the request on its way. */
interface SeriesSpan {
  readonly span: Span;
  readonly context: Context;
  request: RequestSpan | undefined;
  requests: number;
  retries: number;
  credits: number;
  uncertain: number;
}

/** A page's request, from its first attempt's sending to the answer no retry follows. */
interface RequestSpan {
  readonly span: Span;
  /** The last attempt's status: a number, or a failure without an answer (`network`, `timeout`, …). */
  status: number | string | undefined;
  retries: number;
  credits: number;
  uncertain: number;
  /** A retry followed the last answer: the request goes on. */
  retrying: boolean;
  ended: boolean;
}

class RecordedRun implements RunSpans {
  readonly #api: OpenTelemetry;
  readonly #tracer: Tracer;
  readonly #span: Span;
  readonly #context: Context;
  readonly #queryText: boolean;
  /** Series with an open span, by id: those being paged (a handful per concurrent request), not the run's whole list. */
  readonly #series = new Map<string, SeriesSpan>();
  #ordinal = 0;
  /** `server.address` and `server.port` of every request, from the start event's destination. */
  #server: Attributes = {};

  constructor(api: OpenTelemetry, tracer: Tracer, span: Span, runContext: Context, queryText: boolean) {
    this.#api = api;
    this.#tracer = tracer;
    this.#span = span;
    this.#context = runContext;
    this.#queryText = queryText;
  }

  observe(event: RunEvent): void {
    switch (event.type) {
      case 'start':
        this.#span.setAttributes({
          'webdata_etl.run.id': event.runId,
          'webdata_etl.run.mode': event.resumed ? 'resume' : 'new',
          'webdata_etl.series.total': event.series,
          'webdata_etl.credits.spent_before': event.spentBefore,
          ...(event.budget === null ? {} : { 'webdata_etl.budget': event.budget }),
          ...(event.replayed > 0 ? { 'webdata_etl.pages.replayed': event.replayed } : {}),
          ...(event.worker ? { 'webdata_etl.worker.id': event.worker.id } : {}),
        });
        this.#server = serverOf(event.destination.origin);
        return;
      case 'series_start':
        this.#startSeries(event.series, {
          'webdata_etl.endpoint': event.endpoint,
          ...(event.country ? { 'webdata_etl.country': event.country } : {}),
          ...(event.lang ? { 'webdata_etl.lang': event.lang } : {}),
          'webdata_etl.series.resumed': event.resumed,
          ...(this.#queryText ? { 'webdata_etl.series.id': event.series, 'webdata_etl.series.query': event.query } : {}),
        });
        return;
      case 'request':
        return this.#sending(event);
      case 'response':
        return this.#answered(event);
      case 'retry': {
        const request = this.#series.get(event.series)?.request;
        if (!request || request.ended) return;
        request.retries += 1;
        request.retrying = true;
        request.span.addEvent('webdata_etl.retry', {
          'webdata_etl.attempt': event.attempt,
          'webdata_etl.reason': event.reason,
          'webdata_etl.retry.delay': event.delayMs / 1000,
          ...statusAttributes(request.status),
        });
        return;
      }
      case 'series':
        return this.#endSeries(event.series, { reason: event.reason, pages: event.pages });
      case 'pause':
        this.#span.addEvent('webdata_etl.pause', { 'webdata_etl.reason': event.reason, 'webdata_etl.pause.duration': event.ms / 1000 });
        return;
      case 'stop':
        this.#span.addEvent('webdata_etl.stop', {
          'webdata_etl.reason': event.reason,
          ...(event.path ? { 'webdata_etl.endpoint': event.path } : {}),
          // A stop's message may quote the server's answer.
          ...(this.#queryText ? { 'webdata_etl.message': event.message } : {}),
        });
        return;
      default:
        return;
    }
  }

  ended(summary: RunSummary): RunSummary {
    this.#endOpen();
    this.#span.setAttributes({
      'webdata_etl.run.id': summary.runId,
      'webdata_etl.run.status': summary.status,
      ...(summary.reason ? { 'webdata_etl.reason': summary.reason } : {}),
      'webdata_etl.requests': summary.requests.total,
      'webdata_etl.retries': summary.retries,
      'webdata_etl.credits.spent': summary.credits.spent,
      'webdata_etl.credits.uncertain': summary.credits.uncertain,
      'webdata_etl.pages.fetched': summary.pages.fetched,
      'webdata_etl.items.written': summary.items.written,
      'webdata_etl.items.duplicates': summary.items.duplicates,
      'webdata_etl.items.dropped': summary.items.dropped,
      'webdata_etl.series.completed': summary.series.completed,
      'webdata_etl.series.failed': summary.series.failed,
      ...(summary.worker ? { 'webdata_etl.worker.pages': summary.worker.pages, 'webdata_etl.worker.credits': summary.worker.credits } : {}),
    });
    // Stopped by a 401, a 402, a quota or a stall: the run could not go on. Its reason is a word of ours, never text.
    if (summary.status === 'stopped') this.#span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: summary.reason ?? 'stopped' });
    this.#span.end();
    return summary;
  }

  failed(error: unknown): unknown {
    this.#endOpen();
    const type = error instanceof Error ? error.constructor.name : typeof error;
    // Messages are built from redacted text (docs/security.md): no key. But one can quote a page's key (which holds its
    // series' query) or the server's answer, so it goes with the query text or not at all.
    const message = this.#queryText ? (error instanceof Error ? error.message : String(error)) : undefined;
    this.#span.setAttribute('error.type', type);
    this.#span.addEvent('exception', { 'exception.type': type, ...(message === undefined ? {} : { 'exception.message': message }) });
    this.#span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: message ?? type });
    this.#span.end();
    return error;
  }

  #startSeries(id: string, attributes: Attributes): SeriesSpan {
    // The same series again in one invocation (handed back to this worker): the earlier span ends where it was.
    if (this.#series.has(id)) this.#endSeries(id, undefined);
    this.#ordinal += 1;
    const span = this.#tracer.startSpan(
      'webdata_etl.series',
      // The ordinal stands for the series (its id holds its query): the n-th this process started in this invocation.
      { kind: this.#api.SpanKind.INTERNAL, attributes: { 'webdata_etl.series.ordinal': this.#ordinal, ...attributes } },
      this.#context,
    );
    const series: SeriesSpan = { span, context: this.#api.trace.setSpan(this.#context, span), request: undefined, requests: 0, retries: 0, credits: 0, uncertain: 0 };
    this.#series.set(id, series);
    return series;
  }

  #endSeries(id: string, end: { reason: string; pages: number } | undefined): void {
    // A series that ended without being started here (a source that does not ask where its series stand) still has one.
    const series = this.#series.get(id) ?? this.#startSeries(id, {});
    this.#series.delete(id);
    if (series.request) this.#endRequest(series, series.request);
    series.span.setAttributes({
      ...(end ? { 'webdata_etl.reason': end.reason, 'webdata_etl.pages.fetched': end.pages } : {}),
      'webdata_etl.requests': series.requests,
      'webdata_etl.retries': series.retries,
      'webdata_etl.credits.spent': series.credits,
      'webdata_etl.credits.uncertain': series.uncertain,
    });
    if (end?.reason === 'failed' || end?.reason === 'forbidden') series.span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: end.reason });
    series.span.end();
  }

  /** An attempt is sent: the first of a page's request starts its span; a retry goes on in the span already open. */
  #sending(event: Extract<RunEvent, { type: 'request' }>): void {
    // A source that does not ask where its series stand tells no series' start: its first request does.
    const series = this.#series.get(event.series) ?? this.#startSeries(event.series, { 'webdata_etl.endpoint': event.path });
    const open = series.request && !series.request.ended ? series.request : undefined;
    if (open && event.attempt > 1) return;
    if (open) this.#endRequest(series, open);
    const span = this.#tracer.startSpan(
      'webdata_etl.request',
      {
        kind: this.#api.SpanKind.CLIENT,
        attributes: {
          // The path alone: the query string holds the query.
          'url.path': event.path,
          ...this.#server,
          // The contract fixes the search endpoint's method; another endpoint's is its source's, not known here.
          ...(event.path === SEARCH_PATH ? { 'http.request.method': 'GET' } : {}),
          ...(event.page === undefined ? {} : { 'webdata_etl.page': event.page }),
        },
      },
      series.context,
    );
    series.request = { span, status: undefined, retries: event.attempt - 1, credits: 0, uncertain: 0, retrying: false, ended: false };
    series.requests += 1;
  }

  /**
   * An attempt's answer, or its failure without one. Whether a retry follows is told at once, in the same turn (the
   * scheduler's outcome policy is synchronous): the span ends a microtask later unless one did.
   */
  #answered(event: Extract<RunEvent, { type: 'response' }>): void {
    const series = this.#series.get(event.series);
    const request = series?.request;
    if (!series || !request || request.ended) return;
    request.status = event.status;
    request.credits += event.credits;
    series.credits += event.credits;
    if (event.uncertain) {
      request.uncertain += event.credits;
      series.uncertain += event.credits;
    }
    request.retrying = false;
    queueMicrotask(() => {
      if (!request.retrying && !request.ended) this.#endRequest(series, request);
    });
  }

  #endRequest(series: SeriesSpan, request: RequestSpan): void {
    request.ended = true;
    if (series.request === request) series.request = undefined;
    series.retries += request.retries;
    request.span.setAttributes({
      ...statusAttributes(request.status),
      'webdata_etl.retries': request.retries,
      ...(request.retries > 0 ? { 'http.request.resend_count': request.retries } : {}),
      'webdata_etl.credits.spent': request.credits,
      'webdata_etl.credits.uncertain': request.uncertain,
    });
    // Any answer but a 2xx failed the attempt (the contract: any status of 300 or more is a failure).
    const status = request.status;
    if (status !== undefined && !(typeof status === 'number' && status >= 200 && status < 300)) {
      request.span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: String(status) });
    }
    request.span.end();
  }

  /** What is still open when the run ends (a failure cancelled it, or a series was taken over): it ends with the run. */
  #endOpen(): void {
    for (const id of [...this.#series.keys()]) this.#endSeries(id, undefined);
  }
}

/** An attempt's status as OpenTelemetry's HTTP attributes: the code answered, or the failure without one as `error.type`. */
function statusAttributes(status: number | string | undefined): Attributes {
  if (status === undefined) return {};
  if (typeof status === 'string') return { 'error.type': status };
  return status >= 200 && status < 300 ? { 'http.response.status_code': status } : { 'http.response.status_code': status, 'error.type': String(status) };
}

/** `server.address` and `server.port` of the API's origin (its scheme's port when none is written). */
function serverOf(origin: string): Attributes {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return {};
  }
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  return { 'server.address': url.hostname.replace(/^\[(.*)\]$/, '$1'), 'server.port': port };
}
