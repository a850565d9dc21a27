// webdata-etl/client: the client with its schemas and helpers, for callers who use it without a pipeline. What it
// throws (WebDataError and its classes, ValidationError) is in webdata-etl/errors, with every other error class.
export { createClient, SEARCH_PATH, type Client, type Item, type SearchResponse, type EndpointRequest, type EndpointResponse, type ResponseMeta, type CallOptions } from './client.ts';
export { type ClientOptions, clientOptionsSchema, isLoopbackHost } from './options.ts';
export { type SearchParams, type ValidSearchParams, searchParamsSchema, parseSearchParams } from './search-params.ts';
export { parseRetryAfter } from './retry-after.ts';
