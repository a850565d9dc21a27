// webdata-etl/client: the client with its schemas and helpers, for callers who use it without a pipeline.
export { createClient, SEARCH_PATH, type Client, type Item, type SearchResponse, type EndpointRequest, type EndpointResponse, type ResponseMeta, type CallOptions } from './client.ts';
export { type ClientOptions, clientOptionsSchema, isLoopbackHost } from './options.ts';
export { type SearchParams, type ValidSearchParams, searchParamsSchema, parseSearchParams } from './search-params.ts';
export { parseRetryAfter } from './retry-after.ts';
export { WebDataError, type FailureKind } from '../errors/web-data-error.ts';
export {
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
} from '../errors/index.ts';
export { ValidationError, type ValidationIssue } from '../errors/validation-error.ts';
