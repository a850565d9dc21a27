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
