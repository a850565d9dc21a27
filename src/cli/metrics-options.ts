import { isIP } from 'node:net';
import { UsageError } from '../errors/usage-error.ts';

/**
 * What the command line's metrics are asked to do, read from its flags and the environment and checked before
 * anything is started or spent (docs/observability.md, "Prometheus endpoint from the command line" and "OTLP export
 * from the command line"). Plain data: the packages that serve and export are loaded only when something is asked
 * for (run-telemetry.ts), so that a run without it loads nothing new.
 */
export interface MetricsSetup {
  endpoint: EndpointOptions | undefined;
  otlp: OtlpOptions | undefined;
  /** The run's spans over OTLP (OTEL_TRACES_EXPORTER, or an OTLP endpoint for them). */
  traces: TraceOptions | undefined;
  /** Said before the run: settings that were ignored, and why. */
  notes: string[];
}

/** Where /metrics is served, and who said so: errors name the flag or variable the user set. */
export interface EndpointOptions {
  host: string;
  port: number;
  hostFrom: string;
  portFrom: string;
  /** How long, after the run, to wait for a scrape of its final figures (0: not at all). */
  lingerMs: number;
}

export type OtlpProtocol = 'http/protobuf' | 'http/json' | 'grpc';

export interface OtlpOptions {
  protocol: OtlpProtocol;
  /** The exporter package for the protocol: an optional peer dependency, in the user's project or not. */
  package: string;
  /** The variable that chose the protocol (or that the default applies), for the message when the package is missing. */
  protocolFrom: string;
  intervalMs: number;
  timeoutMs: number;
}

/** Where the run's spans go: the OTLP trace exporter of the protocol asked for. */
export interface TraceOptions {
  protocol: OtlpProtocol;
  package: string;
  protocolFrom: string;
}

/** The command line's metrics flags, as parseArgs gives them. */
export interface MetricsFlags {
  'metrics-port'?: string | undefined;
  'metrics-host'?: string | undefined;
  'metrics-linger'?: string | undefined;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Loopback: /metrics has no authentication, so it is reachable from this machine only unless a host is chosen. */
const DEFAULT_HOST = '127.0.0.1';
/** Prometheus' registered port for OpenTelemetry's exporter: what OTEL_METRICS_EXPORTER=prometheus listens on. */
const OTEL_PROMETHEUS_PORT = 9464;
/** Long enough for a scraper at a usual interval (15 s) to come once more; short enough not to hold up a script. */
const DEFAULT_LINGER_S = 15;
/** A day: longer would overflow a timer (about 24.8 days) and is no longer a wait for a scrape. */
const MAX_LINGER_S = 86_400;

/** The OTLP exporter package of each protocol OpenTelemetry's variables may name (the specification's default first). */
export const OTLP_PACKAGES: Readonly<Record<OtlpProtocol, string>> = {
  'http/protobuf': '@opentelemetry/exporter-metrics-otlp-proto',
  'http/json': '@opentelemetry/exporter-metrics-otlp-http',
  grpc: '@opentelemetry/exporter-metrics-otlp-grpc',
};

/** The OTLP trace exporter package of each protocol. */
export const OTLP_TRACE_PACKAGES: Readonly<Record<OtlpProtocol, string>> = {
  'http/protobuf': '@opentelemetry/exporter-trace-otlp-proto',
  'http/json': '@opentelemetry/exporter-trace-otlp-http',
  grpc: '@opentelemetry/exporter-trace-otlp-grpc',
};

/** The OpenTelemetry SDK's defaults (its environment-variable specification). */
const DEFAULT_EXPORT_INTERVAL_MS = 60_000;
const DEFAULT_EXPORT_TIMEOUT_MS = 30_000;

/** Reads and checks the metrics flags and variables; throws a UsageError naming the one that is wrong. */
export function metricsSetup(flags: MetricsFlags, env: Env): MetricsSetup {
  const notes: string[] = [];
  const exporters = otelExporters(env, notes);
  return { endpoint: endpointOptions(flags, env, exporters.has('prometheus')), otlp: otlpOptions(env, exporters), traces: traceOptions(env, notes), notes };
}

/** Whether anything is asked for: the caller loads the SDK only then. */
export function wantsTelemetry(setup: MetricsSetup): boolean {
  return setup.endpoint !== undefined || setup.otlp !== undefined || setup.traces !== undefined;
}

/**
 * The run's spans go over OTLP when OTEL_TRACES_EXPORTER lists `otlp`, or, unset, when an OTLP endpoint for them is
 * (OTEL_EXPORTER_OTLP_ENDPOINT or its _TRACES_ form): as for the metrics, the SDK's default of OTLP to localhost
 * whatever is set would send every run's spans to whatever listens there. OTEL_SDK_DISABLED=true turns it off.
 */
function traceOptions(env: Env, notes: string[]): TraceOptions | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const listed = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  for (const name of listed) if (name !== 'otlp' && name !== 'none') notes.push(`OTEL_TRACES_EXPORTER=${name} is ignored: webdata-etl's command line exports spans over otlp`);
  const wanted = listed.length > 0 ? listed.includes('otlp') && !listed.includes('none') : nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT) || nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  if (!wanted) return undefined;
  const chosen = firstOf(['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL], ['OTEL_EXPORTER_OTLP_PROTOCOL', env.OTEL_EXPORTER_OTLP_PROTOCOL]);
  const protocol = (chosen?.value ?? 'http/protobuf') as OtlpProtocol;
  if (!Object.hasOwn(OTLP_TRACE_PACKAGES, protocol)) {
    throw new UsageError(`${chosen?.from} must be one of ${Object.keys(OTLP_TRACE_PACKAGES).join(', ')}; got "${chosen?.value}"`);
  }
  return { protocol, package: OTLP_TRACE_PACKAGES[protocol], protocolFrom: chosen ? `${chosen.from}=${protocol}` : 'the default protocol (http/protobuf)' };
}

/**
 * OTEL_METRICS_EXPORTER as the SDK reads it: a comma-separated list of `otlp`, `prometheus`, `none`, …; OTLP also
 * when it is unset and an OTLP endpoint is. Unlike the SDK, nothing is exported when nothing is set (the SDK's default,
 * OTLP to localhost:4318, would send every run's figures to whatever listens there). OTEL_SDK_DISABLED=true turns
 * all of it off, as the specification says.
 */
function otelExporters(env: Env, notes: string[]): Set<string> {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return new Set();
  const listed = (env.OTEL_METRICS_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  if (listed.includes('none')) return new Set();
  const known = new Set<string>(listed.filter((name) => name === 'otlp' || name === 'prometheus'));
  for (const name of listed) {
    if (name === 'console') notes.push('OTEL_METRICS_EXPORTER=console is ignored: stdout carries the run\'s summary (use otlp or prometheus)');
    else if (!known.has(name)) notes.push(`OTEL_METRICS_EXPORTER=${name} is ignored: webdata-etl's command line exports otlp and prometheus`);
  }
  if (listed.length === 0 && (nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT) || nonEmpty(env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT))) known.add('otlp');
  return known;
}

function endpointOptions(flags: MetricsFlags, env: Env, otelPrometheus: boolean): EndpointOptions | undefined {
  // The flag wins over our variable, which wins over OpenTelemetry's: the more specific and deliberate, the stronger.
  const port = firstOf(['--metrics-port', flags['metrics-port']], ['WEBDATA_METRICS_PORT', env.WEBDATA_METRICS_PORT]) ??
    (otelPrometheus ? (firstOf(['OTEL_EXPORTER_PROMETHEUS_PORT', env.OTEL_EXPORTER_PROMETHEUS_PORT]) ?? { from: 'OTEL_METRICS_EXPORTER=prometheus', value: String(OTEL_PROMETHEUS_PORT) }) : undefined);
  const hostFlag = firstOf(['--metrics-host', flags['metrics-host']]);
  const lingerFlag = firstOf(['--metrics-linger', flags['metrics-linger']]);
  if (port === undefined) {
    // A flag alone is a mistake worth saying; a variable alone (set for every command of a shell) is not.
    const alone = hostFlag ?? lingerFlag;
    if (alone) throw new UsageError(`${alone.from} needs --metrics-port (or WEBDATA_METRICS_PORT): it says where /metrics is served`);
    return undefined;
  }
  const host = hostFlag ?? firstOf(['WEBDATA_METRICS_HOST', env.WEBDATA_METRICS_HOST]) ??
    (otelPrometheus ? firstOf(['OTEL_EXPORTER_PROMETHEUS_HOST', env.OTEL_EXPORTER_PROMETHEUS_HOST]) : undefined) ?? { from: 'the default', value: DEFAULT_HOST };
  const linger = lingerFlag ?? firstOf(['WEBDATA_METRICS_LINGER', env.WEBDATA_METRICS_LINGER]);
  return {
    port: portNumber(port.value, port.from),
    portFrom: port.from,
    host: hostName(host.value, host.from),
    hostFrom: host.from,
    lingerMs: linger === undefined ? DEFAULT_LINGER_S * 1000 : lingerSeconds(linger.value, linger.from) * 1000,
  };
}

function otlpOptions(env: Env, exporters: Set<string>): OtlpOptions | undefined {
  if (!exporters.has('otlp')) return undefined;
  const chosen = firstOf(['OTEL_EXPORTER_OTLP_METRICS_PROTOCOL', env.OTEL_EXPORTER_OTLP_METRICS_PROTOCOL], ['OTEL_EXPORTER_OTLP_PROTOCOL', env.OTEL_EXPORTER_OTLP_PROTOCOL]);
  const protocol = (chosen?.value ?? 'http/protobuf') as OtlpProtocol;
  if (!Object.hasOwn(OTLP_PACKAGES, protocol)) {
    throw new UsageError(`${chosen?.from} must be one of ${Object.keys(OTLP_PACKAGES).join(', ')}; got "${chosen?.value}"`);
  }
  const intervalMs = milliseconds(env, 'OTEL_METRIC_EXPORT_INTERVAL', DEFAULT_EXPORT_INTERVAL_MS);
  // The SDK's reader refuses a timeout longer than its interval when both are given: an export cannot outlast the next.
  const timeoutMs = Math.min(milliseconds(env, 'OTEL_METRIC_EXPORT_TIMEOUT', DEFAULT_EXPORT_TIMEOUT_MS), intervalMs);
  return { protocol, package: OTLP_PACKAGES[protocol], protocolFrom: chosen ? `${chosen.from}=${protocol}` : 'the default protocol (http/protobuf)', intervalMs, timeoutMs };
}

/** The first of `sources` ([name, value]) whose value is set, with the name it came from. */
function firstOf(...sources: [string, string | undefined][]): { from: string; value: string } | undefined {
  for (const [from, value] of sources) if (nonEmpty(value)) return { from, value: (value as string).trim() };
  return undefined;
}

function nonEmpty(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== '';
}

function portNumber(text: string, from: string): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port >= 0 && port <= 65535)) throw new UsageError(`${from} must be a port number, 0 to 65535 (0: any free port, said on stderr); got "${text}"`);
  return port;
}

/** An IP address (IPv6 with or without brackets) or a host name (RFC 1123 labels); anything else is refused. */
function hostName(text: string, from: string): string {
  const bare = /^\[(.*)\]$/.exec(text)?.[1] ?? text;
  if (isIP(bare) !== 0) return bare;
  const label = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;
  if (bare.length <= 253 && bare.split('.').every((part) => label.test(part))) return bare;
  throw new UsageError(`${from} must be an IP address or a host name (127.0.0.1, ::1, 0.0.0.0 for every interface, metrics.example.internal); got "${text}"`);
}

function lingerSeconds(text: string, from: string): number {
  const seconds = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!(seconds >= 0 && seconds <= MAX_LINGER_S)) {
    throw new UsageError(`${from} must be a number of seconds, 0 to ${MAX_LINGER_S} (0: exit as soon as the run ends); got "${text}"`);
  }
  return seconds;
}

/** A whole number of milliseconds above 0 from an OpenTelemetry variable, or its default when unset. */
function milliseconds(env: Env, name: string, fallback: number): number {
  const text = env[name]?.trim();
  if (!text) return fallback;
  const ms = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(ms > 0 && ms <= 2 ** 31 - 1)) throw new UsageError(`${name} must be a whole number of milliseconds above 0; got "${text}"`);
  return ms;
}

/** The URL of the endpoint as a scraper names it (an IPv6 address in brackets). */
export function endpointUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics`;
}
