import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AbortedError, AuthenticationError, BadRequestError, MalformedResponseError, NetworkError, PlanError, RateLimitError, ServerError, TimeoutError, UnexpectedStatusError, WebDataError } from '../../src/errors/index.ts';
import { createClient } from '../../src/client/index.ts';
import { type Simulator } from '../../src/simulator/index.ts';
import { clientFor, rejection, simulator, TEST_KEY } from '../helpers.ts';

let sim: Simulator;
beforeAll(async () => {
  sim = await simulator({ untitledRate: 0.3, seed: 3 });
});
afterEach(() => sim.clearRules());
afterAll(() => sim.close());

describe('successful responses', () => {
  it('resolves to the data array with status, headers and request id beside it', async () => {
    await using client = clientFor(sim);
    const response = await client.search({ q: 'espresso machine', count: 10 });
    expect(response.status).toBe(200);
    expect(response.data).toHaveLength(10);
    expect(response.headers['content-type']).toContain('application/json');
    expect(response.requestId).toMatch(/^sim-\d+$/);
    expect(response.body.data).toBe(response.data);
  });

  it('keeps items without a title, and every field of every item as served', async () => {
    await using client = clientFor(sim);
    const odd = { link: 'https://a.example/', rank_score: 0.5, nested: { deep: [1, { x: null }] }, title: undefined };
    sim.inject({
      fault: 'status',
      status: 200,
      body: { data: [{ title: 'First', extra: true }, { link: 'https://a.example/', rank_score: 0.5, nested: { deep: [1, { x: null }] } }], next: 'p2' },
      times: 1,
    });
    const response = await client.search({ q: 'anything' });
    expect(response.data).toEqual([{ title: 'First', extra: true }, { ...odd, title: undefined }]);
    expect('title' in (response.data[1] ?? {})).toBe(false);
    expect(response.body.next).toBe('p2');

    // And from the simulator's own generator, where about 30% of items have no title here.
    const many = await client.search({ q: 'untitled items', count: 50 });
    const untitled = many.data.filter((item) => item.title === undefined && item.name === undefined);
    expect(untitled.length).toBeGreaterThan(0);
    expect(many.data).toHaveLength(50);
  });

  it('tolerates a UTF-8 byte-order mark', async () => {
    await using client = clientFor(sim);
    sim.inject({ fault: 'status', status: 200, body: '\uFEFF{"data":[{"title":"Caf\u00e9"}]}', times: 1 });
    expect((await client.search({ q: 'bom' })).data).toEqual([{ title: 'Café' }]);
  });

  it('calls other catalog endpoints with a query string or a JSON body', async () => {
    await using client = clientFor(sim);
    const reviews = await client.request<{ data: unknown[]; next_cursor: string | null }>({
      path: '/appstore/reviews',
      query: { app_id: 'com.example.app', store: 'android' },
    });
    expect(reviews.body.data).toHaveLength(25);
    expect(typeof reviews.body.next_cursor).toBe('string');
    const products = await client.request({ path: '/products/search', body: { query: 'kettle', page: 1 } });
    expect(sim.log().at(-1)).toMatchObject({ method: 'POST', path: '/products/search', status: 200 });
    expect((products.body as { data: unknown[] }).data.length).toBeGreaterThan(0);
  });
});

describe('every failure class', () => {
  async function failure(inject: Parameters<Simulator['inject']>[0] | null, call?: (c: ReturnType<typeof clientFor>) => Promise<unknown>) {
    await using client = clientFor(sim, { timeoutMs: 300 });
    if (inject) sim.inject({ times: 1, ...inject });
    return rejection(call ? call(client) : client.search({ q: 'failure' }));
  }

  it('400 is a BadRequestError carrying the body, not retryable', async () => {
    // The simulator refuses counts above 100; the contract shows no maximum, so the client lets the server decide.
    const error = await failure(null, (c) => c.search({ q: 'x', count: 500 }));
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error).toMatchObject({ status: 400, retryable: false, mayHaveBeenCharged: false, path: '/searchengine/search' });
    expect((error as WebDataError).body).toContain('count must be an integer from 1 to 100');
    expect(error.message).toContain('count must be an integer from 1 to 100');
    expect(error.message).toMatch(/request id sim-\d+/);
  });

  it('401 is an AuthenticationError, for a wrong key, a missing key and a revoked key', async () => {
    await using wrong = createClient({ baseUrl: sim.url, apiKey: 'not_the_right_key_123' });
    const error = await rejection(wrong.search({ q: 'x' }));
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error).toMatchObject({ status: 401, retryable: false });
    expect(error.message).toContain('WEBDATA_API_KEY');

    // A request with no key at all (the client refuses to send one, so go around it).
    const response = await fetch(`${sim.url}/searchengine/search?q=x`);
    expect(response.status).toBe(401);
    expect(await response.text()).toContain('API key missing');

    await using revoked = await simulator({ keys: [{ key: TEST_KEY, name: 'main', status: 'revoked' }] });
    await using client = clientFor(revoked);
    expect(await rejection(client.search({ q: 'x' }))).toBeInstanceOf(AuthenticationError);
  });

  it('402 and 403 are PlanErrors: credits run out, a suspended account, an endpoint outside the plan', async () => {
    await using plan = await simulator({
      keys: [
        { key: TEST_KEY, name: 'main', credits: 2, endpoints: ['/searchengine/search', '/products/search'] },
        { key: 'suspended_key_0001', name: 'suspended', status: 'suspended' },
      ],
    });
    await using client = clientFor(plan);
    await client.search({ q: 'a' });
    await client.search({ q: 'b' });
    const broke = await rejection(client.search({ q: 'c' }));
    expect(broke).toBeInstanceOf(PlanError);
    expect(broke).toMatchObject({ status: 402, retryable: false });
    expect((broke as PlanError).body).toContain('insufficient credits');
    // A heavier endpoint than the balance allows is refused too, and nothing was debited for the refusals.
    expect(await rejection(client.request({ path: '/products/search', body: { query: 'x' } }))).toMatchObject({ status: 402 });
    expect(plan.stats().credits.main).toEqual({ debited: 2, remaining: 0 });

    const forbidden = await rejection(client.request({ path: '/video/search', query: { q: 'x' } }));
    expect(forbidden).toBeInstanceOf(PlanError);
    expect(forbidden).toMatchObject({ status: 403, path: '/video/search' });

    await using suspended = createClient({ baseUrl: plan.url, apiKey: 'suspended_key_0001' });
    expect(await rejection(suspended.search({ q: 'x' }))).toMatchObject({ status: 403, kind: 'plan' });
  });

  it('429 is a RateLimitError with Retry-After parsed from delta-seconds', async () => {
    await using limited = await simulator({ keys: [{ key: TEST_KEY, name: 'main', ratePerSecond: 0.5, burst: 1 }] });
    await using client = clientFor(limited);
    await client.search({ q: 'a' });
    const error = await rejection(client.search({ q: 'b' }));
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: 2000 });
  });

  it('429 with Retry-After as an HTTP date', async () => {
    await using limited = await simulator({ retryAfter: 'http-date', keys: [{ key: TEST_KEY, name: 'main', ratePerSecond: 0.1, burst: 1 }] });
    await using client = clientFor(limited);
    await client.search({ q: 'a' });
    const error = (await rejection(client.search({ q: 'b' }))) as RateLimitError;
    expect(limited.log().at(-1)?.status).toBe(429);
    // The simulator rounds the date up to whole seconds: 10 s to wait, plus up to 2 s of rounding.
    expect(error.retryAfterMs).toBeGreaterThan(8_000);
    expect(error.retryAfterMs).toBeLessThanOrEqual(12_000);
  });

  it('429 without a usable Retry-After leaves retryAfterMs undefined', async () => {
    for (const value of [undefined, 'soon', '-5']) {
      const error = await failure({ fault: 'status', status: 429, headers: value === undefined ? {} : { 'retry-after': value } });
      expect(error).toBeInstanceOf(RateLimitError);
      expect((error as RateLimitError).retryAfterMs).toBeUndefined();
    }
  });

  it('5xx is a retryable ServerError', async () => {
    for (const status of [500, 502, 503, 504]) {
      const error = await failure({ fault: 'status', status });
      expect(error).toBeInstanceOf(ServerError);
      expect(error).toMatchObject({ status, retryable: true, mayHaveBeenCharged: false });
    }
  });

  it('a 3xx is a failure and is not followed', async () => {
    let followed = 0;
    const target = createServer((_req, res) => {
      followed += 1;
      res.end('{"data":[]}');
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    const location = `http://127.0.0.1:${(target.address() as AddressInfo).port}/api/v1/searchengine/search?q=x`;
    try {
      for (const status of [301, 302, 307, 308]) {
        const error = await failure({ fault: 'redirect', status, location });
        expect(error).toBeInstanceOf(UnexpectedStatusError);
        expect(error).toMatchObject({ status, location, retryable: false });
        expect(error.message).toContain('do not follow');
      }
      expect(followed).toBe(0);
    } finally {
      target.close();
    }
  });

  it('other 4xx are UnexpectedStatusErrors with the body', async () => {
    const error = await failure(null, (c) => c.request({ path: '/no/such/endpoint' }));
    expect(error).toBeInstanceOf(UnexpectedStatusError);
    expect(error).toMatchObject({ status: 404 });
    expect((error as WebDataError).body).toContain('no endpoint at /api/v1/no/such/endpoint');
    expect(await failure({ fault: 'status', status: 418, body: 'teapot' })).toMatchObject({ status: 418, body: 'teapot' });
  });

  it('a 2xx that breaks the contract is a MalformedResponseError, and the simulator did charge it', async () => {
    for (const form of ['truncated', 'not-json', 'no-data', 'html'] as const) {
      const before = sim.stats().credits.main?.debited ?? 0;
      const error = await failure({ fault: 'malformed', form });
      expect(error).toBeInstanceOf(MalformedResponseError);
      expect(error).toMatchObject({ status: 200, mayHaveBeenCharged: true, retryable: true });
      expect(error.message).toContain('probably charged');
      expect(sim.stats().credits.main?.debited).toBe(before + 1);
    }
    const notObjects = await failure({ fault: 'status', status: 200, body: { data: [1, 'two'] } });
    expect(notObjects.message).toContain('data[0] is not an object');
  });

  it('a schema given to request() checks the body', async () => {
    const { z } = await import('zod');
    const error = await failure(null, (c) => c.request({ path: '/video/search', query: { q: 'x' }, schema: z.object({ items: z.array(z.unknown()) }) }));
    expect(error).toBeInstanceOf(MalformedResponseError);
    expect(error.message).toContain('items');
  });

  it('a reset connection is a NetworkError that may have been charged', async () => {
    const error = await failure({ fault: 'reset', charged: true });
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({ retryable: true, mayHaveBeenCharged: true });
  });

  it('a refused connection is a NetworkError that was certainly not charged', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await using client = createClient({ baseUrl: `http://127.0.0.1:${port}/api/v1`, apiKey: TEST_KEY });
    const error = await rejection(client.search({ q: 'x' }));
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({ code: 'ECONNREFUSED', mayHaveBeenCharged: false, retryable: true });
  });
});

describe('timeouts and aborts', () => {
  it('a server that never answers is a TimeoutError after timeoutMs', async () => {
    await using client = clientFor(sim, { timeoutMs: 200 });
    sim.inject({ fault: 'hang', times: 1 });
    const error = await rejection(client.search({ q: 'hang' }));
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ timeoutMs: 200, retryable: true, mayHaveBeenCharged: true });
  });

  it('the time limit covers the body too: a 200 that stalls mid-body times out, charged', async () => {
    await using client = clientFor(sim, { timeoutMs: 200 });
    sim.inject({ fault: 'stall-body', times: 1 });
    const error = await rejection(client.search({ q: 'stall' }));
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ mayHaveBeenCharged: true });
  });

  it('an abort signal cancels a request in flight', async () => {
    await using client = clientFor(sim, { timeoutMs: 10_000 });
    sim.inject({ fault: 'hang', times: 1 });
    const controller = new AbortController();
    const pending = rejection(client.search({ q: 'abort me' }, { signal: controller.signal }));
    // Abort once the simulator has the request, so that the abort is of a request in flight.
    while (sim.stats().inFlight === 0) await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    const error = await pending;
    expect(error).toBeInstanceOf(AbortedError);
    expect(error).toMatchObject({ retryable: false });
  });

  it('an already aborted signal sends nothing', async () => {
    await using client = clientFor(sim);
    const before = sim.stats().requests;
    const error = await rejection(client.search({ q: 'x' }, { signal: AbortSignal.abort() }));
    expect(error).toBeInstanceOf(AbortedError);
    expect(error).toMatchObject({ mayHaveBeenCharged: false });
    expect(sim.stats().requests).toBe(before);
  });
});
