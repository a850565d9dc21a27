import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/index.ts';
import { createClient } from '../../src/client/index.ts';
import { type Simulator } from '../../src/simulator/index.ts';
import { clientFor, rejection, simulator, TEST_KEY } from '../helpers.ts';

let sim: Simulator;
beforeAll(async () => {
  sim = await simulator();
});
afterAll(() => sim.close());

async function invalid(params: unknown) {
  await using client = clientFor(sim);
  const before = sim.stats().requests;
  const error = await rejection(client.search(params as never));
  // The point of validating: a request that would earn a 400 is never sent.
  expect(sim.stats().requests).toBe(before);
  expect(error).toBeInstanceOf(ValidationError);
  return error as ValidationError;
}

describe('search parameters are validated before anything is sent', () => {
  it('refuses an empty or blank query', async () => {
    for (const q of ['', '   ', '\t\n']) {
      const error = await invalid({ q });
      expect(error.issues).toEqual([{ path: 'q', message: expect.stringContaining('must not be empty') }]);
    }
    expect((await invalid({})).issues[0]?.path).toBe('q');
    expect((await invalid({ q: 42 })).issues[0]?.message).toContain('must be a string');
  });

  it('refuses pages and counts that are not positive integers', async () => {
    for (const bad of [0, -1, 1.5, Number.NaN, '2']) {
      expect((await invalid({ q: 'x', page: bad })).issues[0]).toMatchObject({ path: 'page', message: expect.stringContaining('positive integer') });
      expect((await invalid({ q: 'x', count: bad })).issues[0]).toMatchObject({ path: 'count', message: expect.stringContaining('positive integer') });
    }
  });

  it('refuses unknown countries, with a hint for common mistakes', async () => {
    const uk = await invalid({ q: 'x', country: 'uk' });
    expect(uk.issues[0]).toMatchObject({ path: 'country', message: expect.stringContaining('did you mean "gb"') });
    expect(uk.message).toContain('extraCountries');
    for (const bad of ['zz', 'usa', 'u', '12', '']) {
      expect((await invalid({ q: 'x', country: bad })).issues[0]?.path).toBe('country');
    }
  });

  it('refuses malformed or unknown language codes', async () => {
    for (const bad of ['english', 'xx', 'en_US', 'e', 'pt-zz', 'zh-hans-xx-yy']) {
      expect((await invalid({ q: 'x', lang: bad })).issues[0]?.path).toBe('lang');
    }
    expect((await invalid({ q: 'x', lang: 'iw' })).issues[0]?.message).toContain('did you mean "he"');
  });

  it('refuses unknown parameters (a typo would otherwise be silently dropped)', async () => {
    const error = await invalid({ q: 'x', contry: 'us' });
    expect(error.message).toContain('contry');
  });

  it('reports every problem at once', async () => {
    const error = await invalid({ q: '', page: 0, country: 'xx' });
    expect(error.issues.map((i) => i.path).sort()).toEqual(['country', 'page', 'q']);
  });

  it('accepts any case for codes and sends them in lower case, with the query trimmed', async () => {
    await using client = clientFor(sim);
    const response = await client.search({ q: '  espresso  ', country: 'GB', lang: 'pt-BR', page: 2, count: 5 });
    expect(response.params).toEqual({ q: 'espresso', country: 'gb', lang: 'pt-br', page: 2, count: 5 });
    const sent = new URLSearchParams(sim.log().at(-1)?.query);
    expect(Object.fromEntries(sent)).toEqual({ q: 'espresso', country: 'gb', lang: 'pt-br', page: '2', count: '5' });
  });

  it('accepts language tags with a script or a numeric region', async () => {
    await using client = clientFor(sim);
    for (const lang of ['zh-hans', 'zh-hant-tw', 'es-419', 'en']) {
      expect((await client.search({ q: 'x', lang })).status).toBe(200);
    }
  });

  it('has an explicit escape hatch for engine-specific codes', async () => {
    await using client = clientFor(sim, { extraCountries: ['XK'], extraLangs: ['iw'] });
    const before = sim.stats().requests;
    // The simulator itself only knows ISO countries: the request is sent and the server decides.
    await expect(client.search({ q: 'x', country: 'xk' })).rejects.toMatchObject({ status: 400 });
    expect((await client.search({ q: 'x', lang: 'iw' })).status).toBe(200);
    expect(sim.stats().requests).toBe(before + 2);
  });
});

describe('client options', () => {
  const base = { apiKey: TEST_KEY };

  it('requires a base URL ending in /api/v1', () => {
    expect(() => createClient({ ...base, baseUrl: 'https://api.example.com/v2' })).toThrow(/baseUrl: must end with the version prefix \/api\/v1/);
    expect(() => createClient({ ...base, baseUrl: 'not a url' })).toThrow(/baseUrl: is not a URL/);
    expect(() => createClient({ ...base } as never)).toThrow(/baseUrl/);
    expect(createClient({ ...base, baseUrl: 'https://api.example.com/api/v1/' }).baseUrl).toBe('https://api.example.com/api/v1');
  });

  it('requires https except on loopback hosts', () => {
    expect(() => createClient({ ...base, baseUrl: 'http://api.example.com/api/v1' })).toThrow(/must use https/);
    for (const host of ['127.0.0.1', 'localhost', '[::1]', '127.1.2.3']) {
      expect(createClient({ ...base, baseUrl: `http://${host}:8080/api/v1` }).baseUrl).toContain(host);
    }
  });

  it('refuses credentials, a query string or a fragment in the base URL', () => {
    expect(() => createClient({ ...base, baseUrl: 'https://user:pw@api.example.com/api/v1' })).toThrow(/must not carry credentials/);
    expect(() => createClient({ ...base, baseUrl: 'https://api.example.com/api/v1?key=1' })).toThrow(/query string/);
  });

  it('needs a key or a token, and names the environment variable', () => {
    const saved = { key: process.env.WEBDATA_API_KEY, token: process.env.WEBDATA_TOKEN };
    delete process.env.WEBDATA_API_KEY;
    delete process.env.WEBDATA_TOKEN;
    try {
      expect(() => createClient({ baseUrl: sim.url })).toThrow(/apiKey: no credentials: set WEBDATA_API_KEY/);
      process.env.WEBDATA_API_KEY = TEST_KEY;
      expect(() => createClient({ baseUrl: sim.url })).not.toThrow();
    } finally {
      if (saved.key === undefined) delete process.env.WEBDATA_API_KEY;
      else process.env.WEBDATA_API_KEY = saved.key;
      if (saved.token !== undefined) process.env.WEBDATA_TOKEN = saved.token;
    }
  });

  it('refuses unknown options and bad values, naming each', () => {
    expect(() => createClient({ baseUrl: sim.url, apiKey: TEST_KEY, timeout: 5 } as never)).toThrow(/timeout/);
    expect(() => createClient({ baseUrl: sim.url, apiKey: TEST_KEY, timeoutMs: -1 })).toThrow(/timeoutMs: must be a whole number of milliseconds from 1/);
    expect(() => createClient({ baseUrl: sim.url, apiKey: '  ' })).toThrow(/apiKey: must not be empty/);
  });

  it('refuses a timeoutMs Node cannot time (2^31 ms or more) and header values with line breaks or control characters', () => {
    const options = { baseUrl: sim.url, apiKey: TEST_KEY };
    expect(() => createClient({ ...options, timeoutMs: 2 ** 31 })).toThrow(/timeoutMs: must be a whole number of milliseconds from 1 to 2147483647/);
    for (const userAgent of ['etl/1.0\r\nX-Injected: 1', 'etl\n', 'etl\u0000', 'etl\u007f', 'etl 日本']) {
      expect(() => createClient({ ...options, userAgent }), JSON.stringify(userAgent)).toThrow(/userAgent: must be an HTTP header value/);
    }
    expect(() => createClient({ ...options, tokenScheme: 'Bearer\r\n' })).toThrow(/tokenScheme: must be an HTTP header value/);
    // A key pasted with an invisible character (a zero-width space) was sent, refused by undici, retried and counted.
    for (const apiKey of [`${TEST_KEY}\u200b`, `${TEST_KEY}\u0001`]) {
      let error: unknown;
      try {
        createClient({ baseUrl: sim.url, apiKey });
      } catch (e) {
        error = e;
      }
      expect(String(error)).toMatch(/apiKey: must be an HTTP header value/);
      expect(String(error)).not.toContain(TEST_KEY);
    }
    expect(() => createClient({ ...options, timeoutMs: 2 ** 31 - 1, userAgent: 'café\tetl/1.0' })).not.toThrow();
  });

  it('refuses endpoint paths that could escape the base URL', async () => {
    await using client = clientFor(sim);
    for (const path of ['video/search', '/../admin', '/a?b=c', 'https://evil.example/']) {
      await expect(client.request({ path })).rejects.toThrow(/path: must be an endpoint path/);
    }
  });
});
