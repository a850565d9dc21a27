// The package root: what a pipeline author writes with (test/package/package-exports.test.ts pins its values). Everything else
// is a subpath — webdata-etl/errors (every error class), webdata-etl/client (the client on its own),
// webdata-etl/notifications (a webhook receiver's), webdata-etl/scheduler, webdata-etl/simulator,
// webdata-etl/analytics, webdata-etl/report (docs/development.md#what-the-package-exports).

// A pipeline and its run
export { definePipeline, type Pipeline, type PipelineDefinition } from './config/define.ts';
export { run, type RunOptions, type RunEvent } from './run/run.ts';
export { stream, type PageStream } from './run/stream.ts';
export { type RunSummary, type RunStatus } from './run/summary.ts';
export { runFromCommandLine } from './run-from-command-line.ts';
export { EXIT } from './run/exit-codes.ts';
export { pipelineFromConfig, type JsonConfig } from './config/json-config.ts';

// A pipeline's webhooks (what a receiver is sent, and how it checks it: webdata-etl/notifications)
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
export { type Stage } from './pipeline/compose.ts';
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

// The API's items, as a source of your own gets them (the client itself: webdata-etl/client)
export { type Item } from './client/client.ts';

// The errors a caller of run() or stream() acts on, each in its own way (every class: webdata-etl/errors):
// WebDataEtlError is the base of them all (the library's own failures, from anything else); ValidationError, bad
// input to fix (its issues name each field); RunLifecycleError, a run that cannot start as asked (resume refused,
// the plan changed: fix it, or start afresh); LeaseHeldError, another process at the pipeline (try later);
// OutputError, the disk or a database (its problem says whether to fix or to wait); HeapLimitError, a run(url) whose
// heap ran out (run it again with a larger WEBDATA_HEAP_MB). The API's failures (WebDataError and its classes) fail
// a series or stop the run, as its summary says; run() does not reject with them.
export { WebDataEtlError, ValidationError, RunLifecycleError, LeaseHeldError, OutputError, HeapLimitError } from './errors/index.ts';

export { VERSION } from './version.ts';
