import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * A webhook receiver, a real HTTP server on a loopback address (`127.0.0.1` unless told: any 127.x.y.z is this
 * machine's on Linux, a host of its own for WEBDATA_ALLOWED_HOSTS). `answer(n)` says how to answer its n-th request
 * (1-based): a status, or `hang` (never answer). Closed, hanging connections and all, at dispose.
 */
export async function webhookReceiver(options: { host?: string; answer?: (n: number) => number | 'hang' } = {}) {
  const host = options.host ?? '127.0.0.1';
  const answer = options.answer ?? (() => 200);
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      const status = answer(received.length);
      if (status === 'hang') return;
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/hooks/webdata`,
    received,
    /** The bodies received, parsed. */
    bodies: () => received.map((r) => JSON.parse(r.body.toString('utf8')) as Record<string, unknown>),
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
