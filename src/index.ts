export { createClient, SEARCH_PATH, type Client, type Item, type SearchResponse, type EndpointRequest, type EndpointResponse, type ResponseMeta, type CallOptions } from './client/client.ts';
export { type ClientOptions, clientOptionsSchema, isLoopbackHost } from './client/options.ts';
export { type SearchParams, type ValidSearchParams, searchParamsSchema, parseSearchParams } from './client/search-params.ts';
export { parseRetryAfter } from './client/retry-after.ts';
export {
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
  type FailureKind,
  type ValidationIssue,
} from './client/errors.ts';
export { startSimulator, type Simulator, type SimulatorStats, type LogEntry, type SimulatorOptions, type SimulatedKey, type FaultRule, DEFAULT_WEIGHTS } from './simulator/index.ts';
export { VERSION } from './version.ts';
export * from './schedule/index.ts';
export { type Page, type PageMeta, type Series, pageKey } from './pipeline/page.ts';
export { type RunContext } from './pipeline/context.ts';
export { type Stage, pipe, throughStages, StageContractError } from './pipeline/compose.ts';
export { searchPages, searchPagesOptionsSchema, type SearchPagesOptions, DEFAULT_MAX_PAGES, DEFAULT_COUNT } from './sources/search-pages.ts';
export { type Source, type SourcePlan, type SourceContext, type SeriesEnd, type SeriesEndReason } from './sources/source.ts';
export { normalize, DEFAULT_ALIASES, type FieldAliases } from './stages/normalize.ts';
export { normalizedItemSchema, type NormalizedItem, NORMALIZED_COLUMNS } from './stages/normalized-item.ts';
export { canonicalUrl, domainOf } from './stages/canonical-url.ts';
export { dedupe, type DedupeOptions } from './stages/dedupe.ts';
export { mapItems, filterItems, items } from './stages/items.ts';
export { type Sink, type SinkContext } from './sinks/sink.ts';
export { toSqlite, type SqliteSinkOptions, RESULTS_SCHEMA_VERSION } from './sinks/sqlite.ts';
export { toCsv, type CsvSinkOptions, DEFAULT_CSV_COLUMNS } from './sinks/csv.ts';
export { definePipeline, pipelineSchema, type Pipeline, type PipelineDefinition } from './run/define.ts';
export { run, type RunOptions, type RunEvent } from './run/run.ts';
export { runSummarySchema, type RunSummary, type RunStatus } from './run/summary.ts';
export { stopOnSignals } from './run/signals.ts';
export { RunLifecycleError, type LifecycleOptions } from './run/lifecycle.ts';
export { LeaseHeldError } from './state/lease.ts';
export { statePath } from './run/run.ts';
export { runFromCommandLine } from './cli/run-command.ts';
export { EXIT, exitCodeFor } from './cli/exit-codes.ts';
export { pipelineFromConfig, jsonConfigSchema, type JsonConfig } from './config/json-config.ts';
export { endpointPages, endpointPagesOptionsSchema, endpointConfigSchema, type EndpointPagesOptions, type NextPage } from './sources/endpoint-pages.ts';
export { toJsonl, jsonlSinkOptionsSchema, type JsonlSinkOptions } from './sinks/jsonl.ts';
export { exportReport, exportOptionsSchema, type ExportOptions, REPORTS, REPORT_NAMES } from './analytics/export.ts';
export { createResultsViews, createSpendView, applicableViews, viewName, OVERLAP_TOP, type ResultsView } from './analytics/views.ts';
export { renderReport, writeReport, reportOptionsSchema, type ReportOptions } from './report/report.ts';
export { OutputError, type OutputProblem } from './run/output-error.ts';
export { combineSources } from './sources/combine.ts';
