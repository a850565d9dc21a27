// A run's OpenTelemetry spans (issue 31): a run span, a span per series and per page request, whose numbers agree
// with the summary and the server's own count; neither the key nor a query's text unless the application opts in.
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, StackContextManager, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SEARCH_PATH } from '../../src/client/client.ts';
import { type Page, type PipelineDefinition, type RunOptions, normalize, dedupe, searchPages, toSqlite, ValidationError } from '../../src/index.ts';
import { runSpans } from '../../src/run/run-spans.ts';
import type { RunSummary } from '../../src/run/summary.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { rejection, simulator, TEST_KEY } from '../helpers.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

const QUERIES = ['secret espresso query', 'secret kettle query'];

let exporter: InMemorySpanExporter;
let provider: TracerProvider;

beforeEach(() => {
  exporter = new InMemorySpanExporter();
  provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  trace.setGlobalTracerProvider(provider);
});

afterEach(async () => {
  trace.disable();
  context.disable();
  await provider.shutdown();
});

const named = (name: string) => exporter.getFinishedSpans().filter((span) => span.name === name);
const idOf = (span: ReadableSpan) => span.spanContext().spanId;
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const numberAt = (span: ReadableSpan, name: string) => span.attributes[name] as number;
/** Everything a span carries that an exporter sends: its name, attributes, events and status. */
const exported = () =>
  JSON.stringify(exporter.getFinishedSpans().map((span) => ({ name: span.name, attributes: span.attributes, events: span.events, status: span.status, links: span.links })));

function pipeline(dir: ReturnType<typeof workdir>, name = 'traced'): PipelineDefinition {
  return {
    name,
    source: searchPages({ queries: QUERIES, countries: ['us', 'gb'], maxPages: 3 }),
    stages: [normalize(), dedupe()],
    sinks: [toSqlite({ path: dir.path(`${name}.sqlite`) })],
    retry: { attempts: 8, baseDelayMs: 1, maxDelayMs: 5 },
  };
}

async function runTraced(sim: Simulator, definition: PipelineDefinition, options: RunOptions = {}): Promise<RunSummary> {
  const summary = await runOn(sim, definition, options);
  await provider.forceFlush();
  return summary;
}

describe("a run's spans, with an SDK registered by the application", () => {
  it('a run span with the summary; a span per series under it; a span per page request under its series, agreeing with the server; no key, no query text', async () => {
    // 5xx answers too, retried within their page's request span.
    await using sim = await simulator({ seed: 5, faults: { serverErrorRate: 0.2 } });
    using dir = workdir();
    const summary = await runTraced(sim, pipeline(dir));
    expect(summary.status).toBe('completed');

    const [run, ...others] = named('webdata_etl.run');
    expect(others).toHaveLength(0);
    if (!run) throw new Error('no run span');
    expect(run.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(run)).toBeUndefined();
    expect(run.status.code).toBe(SpanStatusCode.UNSET);
    expect(run.attributes).toMatchObject({
      'webdata_etl.pipeline': 'traced',
      'webdata_etl.run.id': summary.runId,
      'webdata_etl.run.mode': 'new',
      'webdata_etl.run.status': 'completed',
      'webdata_etl.requests': summary.requests.total,
      'webdata_etl.retries': summary.retries,
      'webdata_etl.credits.spent': summary.credits.spent,
      'webdata_etl.pages.fetched': summary.pages.fetched,
      'webdata_etl.items.written': summary.items.written,
      'webdata_etl.items.duplicates': summary.items.duplicates,
      'webdata_etl.items.dropped': summary.items.dropped,
    });

    // One span per series, each under the run, with how it ended.
    const series = named('webdata_etl.series');
    expect(series).toHaveLength(summary.series.total);
    expect(series.every((span) => parentOf(span) === idOf(run))).toBe(true);
    expect(series.map((span) => numberAt(span, 'webdata_etl.series.ordinal')).sort()).toEqual([1, 2, 3, 4]);
    expect(series.map((span) => span.attributes['webdata_etl.country']).sort()).toEqual(['gb', 'gb', 'us', 'us']);
    expect(series.every((span) => span.attributes['webdata_etl.endpoint'] === SEARCH_PATH)).toBe(true);
    const byReason: Record<string, number> = {};
    for (const span of series) byReason[span.attributes['webdata_etl.reason'] as string] = (byReason[span.attributes['webdata_etl.reason'] as string] ?? 0) + 1;
    expect(byReason).toEqual(summary.series.byReason);
    expect(series.reduce((pages, span) => pages + numberAt(span, 'webdata_etl.pages.fetched'), 0)).toBe(summary.pages.fetched);

    // One span per page request, under its series; its retries are events in it.
    const requests = named('webdata_etl.request');
    const seriesIds = new Set(series.map(idOf));
    expect(requests.every((span) => seriesIds.has(parentOf(span) ?? ''))).toBe(true);
    expect(requests.every((span) => span.kind === SpanKind.CLIENT)).toBe(true);
    expect(requests).toHaveLength(summary.pages.fetched);
    const attempts = requests.reduce((total, span) => total + 1 + numberAt(span, 'webdata_etl.retries'), 0);
    expect(attempts).toBe(summary.requests.total);
    expect(attempts).toBe(sim.stats().requests);
    // Every attempt's status, the last one's on the span and the others' on its retries, is the server's count.
    const statuses: Record<string, number> = {};
    const count = (status: unknown) => void (statuses[String(status)] = (statuses[String(status)] ?? 0) + 1);
    for (const span of requests) {
      count(span.attributes['http.response.status_code']);
      for (const event of span.events) if (event.name === 'webdata_etl.retry') count(event.attributes?.['http.response.status_code']);
    }
    expect(statuses).toEqual(sim.stats().byStatus);
    expect(Object.keys(statuses).some((status) => status.startsWith('5'))).toBe(true);
    expect(requests.filter((span) => span.status.code === SpanStatusCode.ERROR)).toHaveLength(0);
    const host = new URL(sim.url).hostname;
    for (const span of requests) {
      expect(span.attributes).toMatchObject({ 'url.path': SEARCH_PATH, 'http.request.method': 'GET', 'server.address': host, 'server.port': Number(new URL(sim.url).port) });
    }
    // Each series' requests ask for its pages in order, from the first.
    for (const parent of series) {
      const pages = requests.filter((span) => parentOf(span) === idOf(parent)).map((span) => numberAt(span, 'webdata_etl.page'));
      expect(pages.sort()).toEqual(Array.from({ length: pages.length }, (_, i) => i + 1));
      expect(pages).toHaveLength(numberAt(parent, 'webdata_etl.requests'));
    }

    // Credits: the requests' add up to their series', and to the summary's and the server's.
    const spent = (spans: ReadableSpan[]) => spans.reduce((total, span) => total + numberAt(span, 'webdata_etl.credits.spent'), 0);
    expect(spent(requests)).toBe(summary.credits.spent);
    expect(spent(series)).toBe(summary.credits.spent);
    expect(spent(requests)).toBe(sim.stats().credits.main?.debited);

    const text = exported();
    expect(text).not.toContain(TEST_KEY);
    for (const query of QUERIES) expect(text).not.toContain(query);
    expect(text).not.toContain('secret');
  });

  it('a series that fails and a connection reset after charging: error statuses, retries as events, uncertain credits; the run itself is not in error', async () => {
    await using sim = await simulator({
      seed: 10,
      rules: [
        { fault: 'status', status: 503, match: { q: 'secret kettle query', country: 'gb' } },
        { fault: 'reset', charged: true, times: 1, match: { q: 'secret espresso query', country: 'us', page: 2 } },
      ],
    });
    using dir = workdir();
    const summary = await runTraced(sim, { ...pipeline(dir), retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 5 } });
    expect(summary.status).toBe('failed_series');
    const [run] = named('webdata_etl.run');
    expect(run?.attributes['webdata_etl.run.status']).toBe('failed_series');
    expect(run?.status.code).toBe(SpanStatusCode.UNSET);

    const series = named('webdata_etl.series');
    const failed = series.filter((span) => span.attributes['webdata_etl.reason'] === 'failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]?.attributes['webdata_etl.country']).toBe('gb');
    expect(failed[0]?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'failed' });
    expect(series.filter((span) => span.status.code === SpanStatusCode.ERROR)).toHaveLength(1);

    const requests = named('webdata_etl.request');
    const [refused, ...more] = requests.filter((span) => parentOf(span) === idOf(failed[0] as ReadableSpan));
    expect(more).toHaveLength(0);
    expect(refused?.status).toEqual({ code: SpanStatusCode.ERROR, message: '503' });
    expect(refused?.attributes).toMatchObject({ 'http.response.status_code': 503, 'error.type': '503', 'webdata_etl.retries': 2, 'http.request.resend_count': 2, 'webdata_etl.credits.spent': 0 });
    const retries = refused?.events.filter((event) => event.name === 'webdata_etl.retry') ?? [];
    expect(retries.map((event) => [event.attributes?.['webdata_etl.attempt'], event.attributes?.['http.response.status_code'], event.attributes?.['webdata_etl.reason']])).toEqual([
      [1, 503, 'transient'],
      [2, 503, 'transient'],
    ]);

    // The reset came after the server charged: the credit counts as spent, uncertain; the retry was answered.
    const reset = requests.filter((span) => numberAt(span, 'webdata_etl.credits.uncertain') > 0);
    expect(reset).toHaveLength(1);
    expect(reset[0]?.attributes).toMatchObject({ 'webdata_etl.page': 2, 'http.response.status_code': 200, 'webdata_etl.retries': 1, 'webdata_etl.credits.spent': 2, 'webdata_etl.credits.uncertain': 1 });
    expect(reset[0]?.status.code).toBe(SpanStatusCode.UNSET);
    expect(reset[0]?.events.find((event) => event.name === 'webdata_etl.retry')?.attributes?.['error.type']).toBe('network');

    const sum = (spans: ReadableSpan[], name: string) => spans.reduce((total, span) => total + numberAt(span, name), 0);
    expect(sum(requests, 'webdata_etl.credits.spent')).toBe(summary.credits.spent);
    expect(sum(requests, 'webdata_etl.credits.uncertain')).toBe(summary.credits.uncertain);
    expect(sum(requests, 'webdata_etl.retries') + requests.length).toBe(summary.requests.total);
    const text = exported();
    expect(text).not.toContain(TEST_KEY);
    expect(text).not.toContain('secret');
  });

  it('with telemetry.queryText, each series span carries its query (and its id, which holds it)', async () => {
    await using sim = await simulator({ seed: 6 });
    using dir = workdir();
    const summary = await runTraced(sim, pipeline(dir), { telemetry: { queryText: true } });
    const series = named('webdata_etl.series');
    expect(series).toHaveLength(summary.series.total);
    expect(series.map((span) => span.attributes['webdata_etl.series.query']).sort()).toEqual([QUERIES[0], QUERIES[0], QUERIES[1], QUERIES[1]]);
    expect(series.every((span) => String(span.attributes['webdata_etl.series.id']).includes(String(span.attributes['webdata_etl.series.query'])))).toBe(true);
    expect(exported()).not.toContain(TEST_KEY);
  });

  it("a run that fails: its span records the error's class, and its message (which may quote a query) only with queryText", async () => {
    class BrokenStageError extends Error {}
    const broken = async function* (pages: AsyncIterable<Page<unknown>>) {
      for await (const page of pages) throw new BrokenStageError(`cannot take the page of "${page.series.query}"`);
    };
    await using sim = await simulator({ seed: 7 });
    using dir = workdir();

    const error = await rejection(runTraced(sim, { ...pipeline(dir, 'quiet'), stages: [broken] }));
    expect(error).toBeInstanceOf(BrokenStageError);
    const [quiet] = named('webdata_etl.run');
    expect(quiet?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'BrokenStageError' });
    expect(quiet?.attributes['error.type']).toBe('BrokenStageError');
    expect(quiet?.events.find((event) => event.name === 'exception')?.attributes).toEqual({ 'exception.type': 'BrokenStageError' });
    // What was open when it failed ended with it.
    expect(exporter.getFinishedSpans().every((span) => span.ended)).toBe(true);
    expect(exported()).not.toContain('secret');
    exporter.reset();

    await rejection(runTraced(sim, { ...pipeline(dir, 'told'), stages: [broken] }, { telemetry: { queryText: true } }));
    const [told] = named('webdata_etl.run');
    expect(told?.status.code).toBe(SpanStatusCode.ERROR);
    expect(told?.status.message).toMatch(/^cannot take the page of "secret (espresso|kettle) query"$/);
    expect(told?.events.find((event) => event.name === 'exception')?.attributes?.['exception.message']).toBe(told?.status.message);
    expect(exported()).not.toContain(TEST_KEY);
  });

  it("an application's span active around run() is the run span's parent", async () => {
    context.setGlobalContextManager(new StackContextManager().enable());
    await using sim = await simulator({ seed: 8 });
    using dir = workdir();
    const app = trace.getTracer('the-application').startSpan('nightly harvest');
    await context.with(trace.setSpan(context.active(), app), () => runOn(sim, pipeline(dir)));
    app.end();
    await provider.forceFlush();
    const [run] = named('webdata_etl.run');
    expect(run?.parentSpanContext?.spanId).toBe(app.spanContext().spanId);
    expect(run?.spanContext().traceId).toBe(app.spanContext().traceId);
  });

  it('a misspelt telemetry option is refused before anything is sent, naming the field', async () => {
    await using sim = await simulator({ seed: 9 });
    using dir = workdir();
    const error = await rejection(runOn(sim, pipeline(dir), { telemetry: { querytext: true } as never }));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.message).toMatch(/telemetry.*querytext/s);
    expect(sim.stats().requests).toBe(0);
  });

  it("a worker of a distributed run: its run span names the worker, and carries its share", () => {
    const spans = runSpans('shared');
    spans.observe({
      type: 'start',
      runId: 'run-1',
      pipeline: 'shared',
      series: 10,
      maxPages: 3,
      budget: 50,
      spentBefore: 0,
      resumed: true,
      replayed: 0,
      notes: [],
      destination: { origin: 'https://api.example.com', from: 'WEBDATA_BASE_URL', credentials: 'key from WEBDATA_API_KEY' },
      worker: { id: 'host-a:4242:1', joined: true },
    });
    spans.ended({ ...summaryOf('run-1'), worker: { id: 'host-a:4242:1', host: 'host-a', pid: 4242, pages: 7, credits: 7 } });
    const [run] = named('webdata_etl.run');
    expect(run?.attributes).toMatchObject({
      'webdata_etl.worker.id': 'host-a:4242:1',
      'webdata_etl.run.mode': 'resume',
      'webdata_etl.budget': 50,
      'webdata_etl.worker.pages': 7,
      'webdata_etl.worker.credits': 7,
    });
  });
});

/** A summary with nothing done, for spans fed events by hand. */
function summaryOf(runId: string): RunSummary {
  return {
    runId,
    pipeline: 'shared',
    status: 'completed',
    requests: { total: 0, byStatus: {} },
    retries: 0,
    rateLimitedWaitMs: 0,
    credits: { spent: 0, uncertain: 0, uncommitted: 0, budget: 50, byEndpoint: {} },
    pages: { fetched: 0 },
    items: { served: 0, written: 0, duplicates: 0, dropped: 0 },
    series: { total: 10, completed: 0, failed: 0, failedBy: {}, stopped: {}, byReason: {} },
    destination: { origin: 'https://api.example.com', from: 'WEBDATA_BASE_URL', credentials: 'key from WEBDATA_API_KEY' },
    outputs: [],
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:00:01.000Z',
    durationMs: 1000,
  };
}
