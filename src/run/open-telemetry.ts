import { createRequire } from 'node:module';
import type * as OpenTelemetryApi from '@opentelemetry/api';

export type OpenTelemetry = typeof OpenTelemetryApi;

/**
 * Where `@opentelemetry/api` keeps what an application registered (a meter or tracer provider, a context manager, a
 * logger), whichever copy of the API registered it: the global it documents for copies to share, one per major version.
 */
const REGISTERED = Symbol.for('opentelemetry.js.api.1');

/**
 * OpenTelemetry's API, loaded only when an application (or the command line's `--metrics`/`--otlp`) has registered
 * something with it: until then its metrics and spans are no-ops, and a run that nobody observes does not load its
 * 50-odd modules at start-up (docs/benchmarks.md's start-up). Loaded with `require` so that a run's observer is made
 * before run() first awaits (its spans' parent is the caller's context then); every copy of the API shares the global.
 */
export function registeredOpenTelemetry(): OpenTelemetry | undefined {
  if (!(REGISTERED in globalThis)) return undefined;
  api ??= createRequire(import.meta.url)('@opentelemetry/api') as OpenTelemetry;
  return api;
}
let api: OpenTelemetry | undefined;
