import { createHash, randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { type Client, createClient } from '../client/client.ts';
import { ValidationError } from '../client/errors.ts';
import { seriesStates } from '../pipeline/context.ts';
import { throughStages } from '../pipeline/compose.ts';
import type { Page, Series } from '../pipeline/page.ts';
import type { Clock } from '../schedule/clock.ts';
import { createScheduler, type SchedulerEvent } from '../schedule/scheduler.ts';
import type { Sink } from '../sinks/sink.ts';
import { type SeriesEnd, type SourceContext } from '../sources/source.ts';
import { toJson } from '../stages/json.ts';
import { openStateStore } from '../state/store.ts';
import { databaseRegistry } from './databases.ts';
import { definePipeline, type Pipeline, type PipelineDefinition } from './define.ts';
import { summarize } from './summarize.ts';
import type { RunSummary } from './summary.ts';

export interface RunOptions {
  /** Overrides WEBDATA_BASE_URL and the pipeline's `api.baseUrl`. */
  baseUrl?: string | undefined;
  /** Overrides WEBDATA_API_KEY (programmatic use; pipeline files never carry a key). */
  apiKey?: string | undefined;
  token?: string | undefined;
  /** Where WEBDATA_* variables are read; default `process.env`. */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /** Aborting it stops the run gracefully: nothing new is sent, answers in flight are committed. */
  signal?: AbortSignal | undefined;
  /** Progress: scheduler events, and one event per page committed and per series ended. */
  onEvent?: ((event: RunEvent) => void) | undefined;
  clock?: Clock | undefined;
  /** A client to use instead of one built from the options (its owner closes it). */
  client?: Client | undefined;
}

export type RunEvent =
  | SchedulerEvent
  | { type: 'start'; runId: string; pipeline: string; series: number; maxPages: number }
  | { type: 'page'; key: string; series: string; number: number; items: number; served: number }
  | { type: 'series'; series: string; reason: string; pages: number };

/**
 * Runs a pipeline from start to finish: plan → scheduler → stages → sinks, one page at a time through the stages,
 * every page written to every sink. Resolves to the run's summary, which is also stored in the `runs` table.
 */
export async function run(definition: PipelineDefinition | Pipeline, options: RunOptions = {}): Promise<RunSummary> {
  const pipeline = definePipeline(definition);
  const env = options.env ?? process.env;
  const plan = pipeline.source.plan();
  const client = options.client ?? buildClient(pipeline, options, env);
  const ownClient = options.client === undefined;
  const emit = options.onEvent ?? (() => undefined);

  const scheduler = createScheduler({
    rate: pipeline.rate.requestsPerSecond
      ? { requestsPerSecond: pipeline.rate.requestsPerSecond }
      : pipeline.rate.requests && pipeline.rate.intervalMs
        ? { requests: pipeline.rate.requests, intervalMs: pipeline.rate.intervalMs }
        : undefined,
    concurrency: pipeline.rate.concurrency,
    budget: pipeline.budget,
    credits: { weights: pipeline.credits.weights },
    ...(pipeline.retry ? { retry: pipeline.retry } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  scheduler.on(emit);

  const databases = databaseRegistry();
  const sinks = pipeline.sinks as Sink<unknown>[];
  const opened: Sink<unknown>[] = [];
  const runId = newRunId();
  const startedAt = new Date();
  let store: ReturnType<typeof openStateStore>;
  try {
    store = openStateStore(databases.get(statePath(pipeline)));
    for (const sink of sinks) {
      await sink.open({ runId, pipeline: pipeline.name, database: databases.get });
      opened.push(sink);
    }
  } catch (error) {
    await closeAll(opened, databases, ownClient ? client : undefined);
    throw error;
  }
  store.startRun({ runId, pipeline: pipeline.name, startedAt: startedAt.toISOString(), fingerprint: fingerprint(plan.fingerprint) });
  emit({ type: 'start', runId, pipeline: pipeline.name, series: plan.seriesCount, maxPages: plan.maxPages });

  const onAbort = () => scheduler.stop('interrupted', 'interrupted by a signal: nothing new is sent; answers in flight are committed');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) onAbort();

  const states = seriesStates();
  const abort = new AbortController();
  const waiting = new Map<string, (result: { new: number }) => void>();
  const ends = new Map<string, SeriesEnd>();
  const processed = new Map<string, number>();
  const totals = { pages: 0, served: 0, written: 0, duplicates: 0 };

  /** A series' stage state can go once the series has ended and all its pages have come out of the stages. */
  const releaseIfDone = (seriesId: string) => {
    const end = ends.get(seriesId);
    if (end && (processed.get(seriesId) ?? 0) >= end.pages) {
      states.release(seriesId);
      processed.delete(seriesId);
    }
  };

  const ctx: SourceContext = {
    runId,
    pipeline: pipeline.name,
    signal: abort.signal,
    seriesState: (stage, series, init) => states.get(stage, series, init),
    client,
    scheduler,
    processed: (page) => new Promise((resolvePage) => waiting.set(page.key, resolvePage)),
    seriesEnded(series: Series, end: SeriesEnd) {
      ends.set(series.id, end);
      store.recordSeries(runId, {
        seriesId: series.id,
        endpoint: series.endpoint,
        query: series.query,
        country: series.country,
        lang: series.lang,
        status: end.reason === 'stopped' ? 'stopped' : 'ended',
        reason: end.reason === 'stopped' ? end.stop : end.reason,
        pages: end.pages,
        error: end.error instanceof Error ? end.error.message : end.error === undefined ? null : String(end.error),
      });
      emit({ type: 'series', series: series.id, reason: end.reason === 'stopped' ? end.stop : end.reason, pages: end.pages });
      releaseIfDone(series.id);
    },
  };

  let failure: unknown;
  try {
    for await (const page of throughStages<unknown>(pipeline.source.pages(ctx), pipeline.stages, ctx)) {
      for (const sink of sinks) await sink.write(page as Page<unknown>);
      totals.pages += 1;
      totals.served += page.meta.served;
      totals.written += page.items.length;
      totals.duplicates += page.meta.dedupe?.duplicates ?? 0;
      const seriesId = page.series.id;
      processed.set(seriesId, (processed.get(seriesId) ?? 0) + 1);
      waiting.get(page.key)?.({ new: page.meta.dedupe?.new ?? page.items.length });
      waiting.delete(page.key);
      emit({ type: 'page', key: page.key, series: seriesId, number: page.number, items: page.items.length, served: page.meta.served });
      releaseIfDone(seriesId);
    }
  } catch (error) {
    failure = error;
    // Cancel what is in flight: the run cannot commit it anyway.
    abort.abort(error);
    scheduler.abort();
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
  }
  await scheduler.onIdle();

  const finishedAt = new Date();
  const summary = summarize({
    runId,
    pipeline: pipeline.name,
    seriesTotal: plan.seriesCount,
    ends,
    scheduler,
    totals,
    startedAt,
    finishedAt,
  });
  try {
    if (failure === undefined) store.finishRun(runId, summary.status, finishedAt.toISOString(), summary);
    else store.finishRun(runId, 'interrupted', finishedAt.toISOString(), summary, failure instanceof Error ? failure.message : String(failure));
  } finally {
    await closeAll(opened, databases, ownClient ? client : undefined);
  }
  if (failure !== undefined) throw failure;
  return summary;
}

function buildClient(pipeline: Pipeline, options: RunOptions, env: Readonly<Record<string, string | undefined>>): Client {
  const baseUrl = options.baseUrl ?? env.WEBDATA_BASE_URL ?? pipeline.api.baseUrl;
  if (!baseUrl) {
    throw new ValidationError(`Pipeline "${pipeline.name}" has no API address`, [
      { path: 'api.baseUrl', message: 'set WEBDATA_BASE_URL (or --base-url, or api.baseUrl), e.g. "https://api.example.com/api/v1"' },
    ]);
  }
  const token = options.token ?? (options.apiKey ? undefined : env.WEBDATA_TOKEN);
  const apiKey = options.apiKey ?? (options.token ? undefined : env.WEBDATA_API_KEY);
  return createClient({
    baseUrl,
    ...(apiKey ? { apiKey } : token ? { token } : {}),
    ...(pipeline.api.timeoutMs ? { timeoutMs: pipeline.api.timeoutMs } : {}),
    ...(pipeline.api.userAgent ? { userAgent: pipeline.api.userAgent } : {}),
    ...(pipeline.api.extraCountries ? { extraCountries: pipeline.api.extraCountries } : {}),
    ...(pipeline.api.extraLangs ? { extraLangs: pipeline.api.extraLangs } : {}),
  });
}

/** The state store lives in the first SQLite sink's file, so that its rows and the state can commit together. */
export function statePath(pipeline: Pipeline): string {
  if (pipeline.state.path) return resolve(pipeline.state.path);
  const sinks = pipeline.sinks as Sink<unknown>[];
  const sqlite = sinks.find((sink) => sink.kind === 'sqlite');
  if (sqlite) return sqlite.path;
  return join(dirname((sinks[0] as Sink<unknown>).path), `${pipeline.name}.state.sqlite`);
}

/** Sortable by time, unique enough for one pipeline: `2026-11-21T22-30-05-123Z-a1b2c3`. */
function newRunId(): string {
  return `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}`;
}

function fingerprint(plan: Record<string, unknown>): string {
  return createHash('sha256').update(toJson(plan)).digest('hex').slice(0, 32);
}

async function closeAll(sinks: readonly Sink<unknown>[], databases: ReturnType<typeof databaseRegistry>, client: Client | undefined) {
  for (const sink of sinks) await sink.close();
  databases.closeAll();
  await client?.close();
}
