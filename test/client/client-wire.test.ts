import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createServer as createTcpServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/index.ts';
import { createClient } from '../../src/client/index.ts';
import { NetworkError } from '../../src/errors/index.ts';
import { parseRetryAfter } from '../../src/client/retry-after.ts';
import { rejection, TEST_KEY } from '../helpers.ts';

/** A bare HTTP server that records what the client sends, so that the wire format is checked, not our own reading of it. */
let seen: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[] = [];
const recorder = createServer((req, res) => {
  let body = '';
  req.on('data', (chunk: Buffer) => {
    body += chunk.toString();
  });
  req.on('end', () => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    res.setHeader('content-type', 'application/json');
    res.end('{"data":[]}');
  });
});
let base = '';
beforeAll(async () => {
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}/api/v1`;
});
afterAll(() => new Promise<void>((resolve) => recorder.close(() => resolve())));

describe('what goes on the wire', () => {
  it('a search is a GET with x-api-key, a JSON accept header and our user agent', async () => {
    seen = [];
    await using client = createClient({ baseUrl: base, apiKey: TEST_KEY });
    await client.search({ q: 'café au lait & more', page: 2, country: 'FR' });
    expect(seen).toHaveLength(1);
    const [request] = seen;
    expect(request?.method).toBe('GET');
    expect(request?.url).toBe('/api/v1/searchengine/search?q=caf%C3%A9+au+lait+%26+more&page=2&country=fr');
    expect(request?.headers['x-api-key']).toBe(TEST_KEY);
    expect(request?.headers.accept).toBe('application/json');
    expect(request?.headers['user-agent']).toBe(`webdata-etl/${VERSION}`);
    expect(request?.headers.authorization).toBeUndefined();
  });

  it('a token goes as Authorization: Bearer, or bare in a header of your choice', async () => {
    seen = [];
    await using bearer = createClient({ baseUrl: base, token: 'jwt.token.value' });
    await bearer.search({ q: 'x' });
    await using custom = createClient({ baseUrl: base, token: 'jwt.token.value', tokenHeader: 'X-Jwt', tokenScheme: null });
    await custom.search({ q: 'x' });
    expect(seen[0]?.headers.authorization).toBe('Bearer jwt.token.value');
    expect(seen[0]?.headers['x-api-key']).toBeUndefined();
    expect(seen[1]?.headers['x-jwt']).toBe('jwt.token.value');
  });

  it('other endpoints: GET with a query string by default, POST with a JSON body when given', async () => {
    seen = [];
    await using client = createClient({ baseUrl: base, apiKey: TEST_KEY, userAgent: 'my-team/1.0' });
    await client.request({ path: '/video/search', query: { q: 'x', tags: ['a', 'b'], skip: undefined, hd: true } });
    await client.request({ path: '/products/search', body: { query: 'kettle', filters: { price: [10, 20] } } });
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/api/v1/video/search?q=x&tags=a&tags=b&hd=true', body: '' });
    expect(seen[0]?.headers['user-agent']).toBe('my-team/1.0');
    expect(seen[1]).toMatchObject({ method: 'POST', url: '/api/v1/products/search' });
    expect(seen[1]?.headers['content-type']).toBe('application/json');
    expect(JSON.parse(seen[1]?.body ?? '')).toEqual({ query: 'kettle', filters: { price: [10, 20] } });
  });
});

describe('HTTPS proxies from the environment', () => {
  it('an https base URL goes through HTTPS_PROXY, unless NO_PROXY names the host', async () => {
    const connects: string[] = [];
    const sockets = new Set<Socket>();
    // A proxy that records CONNECT requests and refuses them: enough to see the client chose the proxy.
    const proxy = createTcpServer((socket) => {
      sockets.add(socket);
      socket.once('data', (data) => {
        connects.push(data.toString().split('\r\n')[0] ?? '');
        socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const saved = { https: process.env.HTTPS_PROXY, no: process.env.NO_PROXY, lower: process.env.https_proxy, lowerNo: process.env.no_proxy };
    delete process.env.https_proxy;
    delete process.env.no_proxy;
    process.env.HTTPS_PROXY = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      process.env.NO_PROXY = 'other.example';
      await using proxied = createClient({ baseUrl: 'https://api.webdata.invalid/api/v1', apiKey: TEST_KEY, timeoutMs: 5000 });
      const error = await rejection(proxied.search({ q: 'x' }));
      expect(error).toBeInstanceOf(NetworkError);
      expect(connects).toEqual(['CONNECT api.webdata.invalid:443 HTTP/1.1']);

      process.env.NO_PROXY = 'api.webdata.invalid';
      await using direct = createClient({ baseUrl: 'https://api.webdata.invalid/api/v1', apiKey: TEST_KEY, timeoutMs: 5000 });
      const dns = await rejection(direct.search({ q: 'x' }));
      // Straight to DNS, which cannot resolve .invalid: nothing reached a server, nothing was charged.
      expect(dns).toMatchObject({ kind: 'network', mayHaveBeenCharged: false });
      expect(connects).toHaveLength(1);
    } finally {
      for (const [name, value] of Object.entries({ HTTPS_PROXY: saved.https, NO_PROXY: saved.no, https_proxy: saved.lower, no_proxy: saved.lowerNo })) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
      for (const socket of sockets) socket.destroy();
      proxy.close();
    }
  });
});

describe('Retry-After', () => {
  const now = Date.parse('2026-11-21T12:00:00Z');

  it('reads delta-seconds', () => {
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('1.5', now)).toBe(1500);
    expect(parseRetryAfter(['30', '60'], now)).toBe(30_000);
  });

  it('reads an HTTP date, relative to now', () => {
    expect(parseRetryAfter('Sat, 21 Nov 2026 12:01:30 GMT', now)).toBe(90_000);
    expect(parseRetryAfter('Saturday, 21-Nov-26 12:00:10 GMT', now)).toBe(10_000);
  });

  it('ignores what it cannot use: missing, garbage, negative, dates in the past', () => {
    for (const value of [undefined, '', 'soon', '-1', '1e3', 'Sat, 21 Nov 2026 11:59:00 GMT', 'Tomorrow-ish 99']) {
      expect(parseRetryAfter(value, now)).toBeUndefined();
    }
  });
});
