// The package root: what a pipeline author uses. Everything else is a subpath — webdata-etl/client (the client's
// schemas and helpers), webdata-etl/scheduler, webdata-etl/simulator, webdata-etl/analytics, webdata-etl/report.

// A pipeline and its run
export { definePipeline, type Pipeline, type PipelineDefinition } from './config/define.ts';
export { run, type RunOptions, type RunEvent } from './run/run.ts';
export { stream, type PageStream } from './run/stream.ts';
export { type RunSummary, type RunStatus } from './run/summary.ts';
export { runFromCommandLine } from './run-from-command-line.ts';
export { EXIT } from './run/exit-codes.ts';
export { pipelineFromConfig, type JsonConfig } from './config/json-config.ts';

// Notifications of a run's end: what a webhook is sent, and how its receiver checks the signature
export { type MissedNotification, missedNotificationSchema, notificationSchema, type Notification, type WebhookBody, webhookBodySchema } from './run/notification.ts';
export { verifyWebhookSignature } from './notify/sign.ts';
export type { DeliveryHeaders, VerifiedDelivery } from './notify/sign.ts';
export { type NotifyOptions } from './notify/webhook-config.ts';

// Sources
// (the builders that check their options, from config/builders.ts: while a file loads, they say every problem at once)
export { searchPages, endpointPages, combineSources, defineSource, dedupe, toSqlite, toPostgres, toCsv, toJsonl } from './config/builders.ts';
export { type SearchPagesOptions } from './sources/search-pages.ts';
export { type EndpointPagesOptions, type NextPage } from './sources/endpoint-pages.ts';
export { type Source } from './sources/source.ts';
export { type Fetched, type SeriesInput, type SourceSpec } from './sources/define-source.ts';
export { paginators, type Paginator, type PageRequest, type PageAnswer } from './sources/paginators/index.ts';

// Stages
export { type Stage, pipe } from './pipeline/compose.ts';
export { type RunContext } from './pipeline/context.ts';
export { type Page, type Series } from './pipeline/page.ts';
export { normalize } from './stages/normalize.ts';
export { type NormalizedItem } from './stages/normalized-item.ts';
export { type DedupeOptions } from './stages/dedupe.ts';
export { mapItems, filterItems, items } from './stages/items.ts';

// Sinks
export { type SqliteSinkOptions } from './sinks/sqlite.ts';
export { type PostgresSinkOptions } from './sinks/postgres.ts';
export { type CsvSinkOptions } from './sinks/csv.ts';
export { type JsonlSinkOptions } from './sinks/jsonl.ts';
export { type Sink, type SinkContext } from './sinks/sink.ts';
export { defineSink, type SinkSpec } from './sinks/define-sink.ts';

// The client
export { createClient, type Client, type Item, type SearchResponse } from './client/client.ts';
export { type ClientOptions } from './client/options.ts';

// Errors: every failure a caller may act on, each a WebDataEtlError
export {
  WebDataEtlError,
  WebDataError,
  BadRequestError,
  AuthenticationError,
  PlanError,
  RateLimitError,
  ServerError,
  UnexpectedStatusError,
  NetworkError,
  TimeoutError,
  MalformedResponseError,
  AbortedError,
  ValidationError,
  UsageError,
  StageContractError,
  RunLifecycleError,
  OutputError,
  LeaseHeldError,
  RunAtWorkError,
  RunEndedError,
  UnstorablePageError,
  HeapLimitError,
  SeriesLostError,
  WorkerExpiredError,
} from './errors/index.ts';

export { VERSION } from './version.ts';
