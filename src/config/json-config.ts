import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { type PipelineDefinition, pipelineSchema } from './define.ts';
import { type CsvSinkOptions, csvSinkOptionsSchema, toCsv } from '../sinks/csv.ts';
import { type JsonlSinkOptions, jsonlSinkOptionsSchema, toJsonl } from '../sinks/jsonl.ts';
import { type PostgresSinkOptions, postgresSinkOptionsSchema, toPostgres } from '../sinks/postgres.ts';
import { type SqliteSinkOptions, sqliteSinkOptionsSchema, toSqlite } from '../sinks/sqlite.ts';
import { combineSources } from '../sources/combine.ts';
import { endpointConfigSchema, endpointPages } from '../sources/endpoint-pages.ts';
import type { Source } from '../sources/source.ts';
import { searchPagesOptionsSchema, searchPages } from '../sources/search-pages.ts';
import { dedupe, dedupeOptionsSchema } from '../stages/dedupe.ts';
import { normalize } from '../stages/normalize.ts';

const sinkConfigSchema = z.discriminatedUnion(
  'type',
  [
    sqliteSinkOptionsSchema.extend({ type: z.literal('sqlite') }),
    csvSinkOptionsSchema.extend({ type: z.literal('csv') }),
    jsonlSinkOptionsSchema.extend({ type: z.literal('jsonl') }),
    postgresSinkOptionsSchema.extend({ type: z.literal('postgres') }),
  ],
  { error: 'must be a sink: { "type": "sqlite" | "csv" | "jsonl", "path": … } or { "type": "postgres", "table": … }' },
);

const shape = pipelineSchema.shape;

/**
 * A pipeline as JSON, for people who would rather not write code: the same fields as `definePipeline`, with the
 * source, stages and sinks described instead of built. Items are always normalized. Relative paths are relative
 * to the working directory.
 */
export const jsonConfigSchema = z.strictObject({
  $schema: z.string().optional(),
  name: shape.name,
  api: shape.api,
  /** The search source: `searchPages` options. */
  search: searchPagesOptionsSchema.optional(),
  /** Another catalog endpoint: `endpointPages` options (a declared `cursor` in place of a `next` function); with `search`, both run. */
  endpoint: endpointConfigSchema.optional(),
  rate: shape.rate,
  budget: shape.budget,
  allowance: shape.allowance,
  keys: shape.keys,
  schedule: shape.schedule,
  credits: shape.credits,
  retry: shape.retry,
  rateLimit: shape.rateLimit,
  state: shape.state,
  notify: shape.notify,
  track: shape.track,
  refresh: shape.refresh,
  retention: shape.retention,
  /** Drop items already seen in a scope (by canonical URL, or by a list of fields). Absent: no dedupe. */
  dedupe: dedupeOptionsSchema
    .extend({ key: z.union([z.literal('url'), z.array(z.string().min(1)).min(1)], { error: 'must be "url" or a list of field names' }).default('url') })
    .optional(),
  sinks: z.array(sinkConfigSchema).min(1, { error: 'needs at least one sink, e.g. [{ "type": "sqlite", "path": "data/results.sqlite" }]' }),
});

export type JsonConfig = z.input<typeof jsonConfigSchema>;

const SECRET_FIELD = /key|token|secret|password|auth/i;

/**
 * Builds a pipeline from a parsed JSON config, validating every field first (each problem named by its path and
 * what would be valid). A key in the file is refused: keys come from WEBDATA_API_KEY, never from a pipeline.
 */
export function pipelineFromConfig(config: unknown): PipelineDefinition {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    const kind = config === null ? 'null' : Array.isArray(config) ? 'an array' : `a ${typeof config}`;
    throw new ValidationError('Invalid pipeline config', [{ path: '', message: `must be one JSON object, { "name": …, "search": { … }, "sinks": [ … ] }, not ${kind}` }]);
  }
  const api = (config as { api?: unknown }).api;
  if (api !== null && typeof api === 'object') {
    const secrets = Object.keys(api).filter((field) => SECRET_FIELD.test(field));
    if (secrets.length > 0) {
      throw new ValidationError('Invalid pipeline config', [
        { path: `api.${secrets[0]}`, message: 'the API key is never read from a pipeline file: set WEBDATA_API_KEY (or WEBDATA_TOKEN) in the environment' },
      ]);
    }
  }
  const { search, endpoint, dedupe: dedupeOptions, sinks, $schema: _schema, ...rest } = ValidationError.parse(jsonConfigSchema, withApiCodes(config), 'Invalid pipeline config');
  const sources = [...(search ? [searchPages(search)] : []), ...(endpoint ? [endpointPages(endpoint)] : [])];
  if (sources.length === 0) {
    throw new ValidationError('Invalid pipeline config', [{ path: 'search', message: 'give a source: "search": { "queries": […] } and/or "endpoint": { "path": "/…" }' }]);
  }
  return {
    ...rest,
    // Both: one pipeline, their series side by side under one scheduler and budget.
    source: sources.length === 1 ? (sources[0] as Source) : combineSources(...sources),
    stages: dedupeOptions ? [normalize(), dedupe(dedupeOptions)] : [normalize()],
    sinks: sinks.map((sink) => {
      const { type, ...options } = sink;
      if (type === 'postgres') return toPostgres(options as PostgresSinkOptions);
      return type === 'sqlite' ? toSqlite(options as SqliteSinkOptions) : type === 'csv' ? toCsv(options as CsvSinkOptions) : toJsonl(options as JsonlSinkOptions);
    }),
  };
}

/**
 * `api.extraCountries` / `api.extraLangs` allow a code for the whole pipeline, its search source included (which
 * checks its countries and langs itself): one allow-list, merged into the source's before anything is validated.
 */
function withApiCodes(config: object): object {
  const { api, search } = config as { api?: Record<string, unknown>; search?: Record<string, unknown> };
  if (typeof search !== 'object' || search === null || typeof api !== 'object' || api === null) return config;
  const merged = { ...search };
  for (const field of ['extraCountries', 'extraLangs'] as const) {
    const own = search[field] ?? [];
    const wide = api[field];
    if (Array.isArray(own) && Array.isArray(wide) && wide.length > 0) merged[field] = [...new Set([...own, ...wide])];
  }
  return { ...config, search: merged };
}
