import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { diag } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { UsageError } from '../errors/usage-error.ts';
import { type EndpointOptions, endpointUrl } from './metrics-options.ts';

/** /metrics in Prometheus' text format, served from the run's own instruments (docs/observability.md). */
export interface MetricsEndpoint {
  /** Where it listens, with the port it was given when 0 was asked for. */
  readonly url: string;
  /** The SDK's reader behind it, to register with the MeterProvider. */
  readonly reader: PrometheusExporter;
  /** Resolves once a scrape that arrives after this call has been answered: it read the figures as they are now. */
  nextScrape(): Promise<void>;
  close(): Promise<void>;
}

/** Prometheus' text format, version 0.0.4: what a scraper that is told nothing assumes, said outright. */
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * Listens on the options' host and port before the run starts, so that a port in use or a host that is not this
 * machine's is said before any credit is spent (a UsageError naming the flag or variable). The server is ours, not
 * the exporter's: the exporter cannot be given port 0 (it takes 0 for its default, 9464), and its own server does not
 * say when a scrape was answered, which the wait for a last scrape needs. It serves GET /metrics and nothing else, and
 * never keeps the process alive by itself.
 */
export async function serveMetrics(options: EndpointOptions): Promise<MetricsEndpoint> {
  // The exporter as a reader only: cumulative sums, as Prometheus expects; its serializer writes the text.
  const reader = new PrometheusExporter({ preventServerStart: true });
  const serializer = new PrometheusSerializer();
  /** Who waits for the next scrape; each request answers the ones that waited before it arrived. */
  const waiting = new Set<() => void>();

  const answer = (request: IncomingMessage, response: ServerResponse) => {
    if (new URL(request.url ?? '/', 'http://metrics.invalid').pathname !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found: the metrics are at /metrics\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    const answered = [...waiting];
    reader.collect().then(
      ({ resourceMetrics, errors }) => {
        if (errors.length > 0) diag.error('metrics: some instruments could not be read', ...errors);
        response.writeHead(200, { 'content-type': CONTENT_TYPE });
        response.end(request.method === 'HEAD' ? undefined : serializer.serialize(resourceMetrics));
      },
      (error: unknown) => response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`# the metrics could not be read: ${String(error)}\n`),
    );
    // Answered: sent whole. A scraper that hung up before the end read nothing, and the ones waiting go on waiting.
    response.once('finish', () => {
      for (const resolve of answered) {
        if (waiting.delete(resolve)) resolve();
      }
    });
  };

  const server = createServer((request, response) => {
    try {
      answer(request, response);
    } catch {
      // A request line URL could not parse: said to that client alone.
      if (!response.headersSent) response.writeHead(400).end();
    }
  });
  try {
    server.listen({ host: options.host, port: options.port });
    await once(server, 'listening');
  } catch (error) {
    throw listenError(error as NodeJS.ErrnoException, options);
  }
  // The run's own work keeps the thread alive; a server left open must not keep it alive after it.
  server.unref();
  const { port } = server.address() as { port: number };
  return {
    url: endpointUrl(options.host, port),
    reader,
    nextScrape: () => new Promise<void>((resolve) => waiting.add(resolve)),
    async close() {
      // A scraper's keep-alive connection would hold close() open until it went idle.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

/** Why the endpoint could not listen, said as a usage error naming the flag or variable to change. */
function listenError(error: NodeJS.ErrnoException, options: EndpointOptions): UsageError {
  const { host, port, hostFrom, portFrom } = options;
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  switch (error.code) {
    case 'EADDRINUSE':
      return new UsageError(`${portFrom} ${port}: ${where} is already in use by another process; choose another port (0: any free one)`);
    case 'EACCES':
      return new UsageError(`${portFrom} ${port}: not allowed to listen on ${where} (ports below 1024 need privileges); choose a port from 1024 to 65535`);
    case 'EADDRNOTAVAIL':
      return new UsageError(`${hostFrom} ${host}: not an address of this machine, so nothing can be served there; choose one of its addresses (127.0.0.1: this machine only)`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new UsageError(`${hostFrom} ${host}: no such host (it did not resolve); choose an IP address of this machine or a name that resolves to one`);
    default:
      return new UsageError(`cannot serve the metrics on ${where} (${portFrom}, ${hostFrom}): ${error.message}`);
  }
}
