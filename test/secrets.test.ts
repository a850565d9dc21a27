import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type Simulator, ValidationError } from '../src/index.ts';
import { resolveClientOptions } from '../src/client/options.ts';
import { clientFor, rejection, simulator, TEST_KEY } from './helpers.ts';

const TOKEN = 'eyJhbGciOiJIUzI1NiJ9.test-token-payload.signature123';

let sim: Simulator;
beforeAll(async () => {
  sim = await simulator({ keys: [{ key: TEST_KEY, name: 'main' }, { token: TOKEN, name: 'jwt' }] });
});
afterAll(() => sim.close());

/** Every way an object reaches a log, a file or a terminal. */
function renderings(value: unknown): string[] {
  const out = [inspect(value, { depth: 10, showHidden: true, getters: true }), String(value)];
  try {
    out.push(JSON.stringify(value) ?? '');
  } catch {
    // Some values (functions) do not serialize; inspect covers them.
  }
  if (value instanceof Error) out.push(value.message, value.stack ?? '', inspect(value.cause, { depth: 10 }));
  return out;
}

function expectNoSecret(value: unknown) {
  for (const text of renderings(value)) {
    expect(text).not.toContain(TEST_KEY);
    expect(text).not.toContain(TOKEN);
  }
}

describe('the key and the token never leak', () => {
  it('not from a client', async () => {
    await using client = clientFor(sim);
    expectNoSecret(client);
    await using jwt = createClient({ baseUrl: sim.url, token: TOKEN });
    expectNoSecret(jwt);
  });

  it('not from errors of any class, even when the server echoes the key in its body', async () => {
    await using client = clientFor(sim, { timeoutMs: 200 });
    const errors: Error[] = [];
    sim.inject({ fault: 'status', status: 500, body: `upstream rejected x-api-key=${TEST_KEY}`, times: 1 });
    sim.inject({ fault: 'status', status: 400, body: { echo: { headers: { 'x-api-key': TEST_KEY } } }, times: 1 });
    sim.inject({ fault: 'status', status: 200, body: `{"data": [ ${TEST_KEY}`, times: 1 });
    sim.inject({ fault: 'hang', times: 1 });
    sim.inject({ fault: 'reset', times: 1 });
    sim.inject({ fault: 'redirect', location: `https://elsewhere.example/?key=${TEST_KEY}`, times: 1 });
    for (let i = 0; i < 6; i++) errors.push(await rejection(client.search({ q: `leak ${i}` })));
    expect(errors.map((e) => e.name)).toEqual([
      'ServerError',
      'BadRequestError',
      'MalformedResponseError',
      'TimeoutError',
      'NetworkError',
      'UnexpectedStatusError',
    ]);
    expect(errors[0]?.message).toContain('[redacted]');
    for (const error of errors) expectNoSecret(error);
  });

  it('not from a token sent as Authorization: Bearer, whose errors are redacted too', async () => {
    await using jwt = createClient({ baseUrl: sim.url, token: TOKEN });
    expect((await jwt.search({ q: 'jwt' })).status).toBe(200);
    expect(sim.log().at(-1)?.key).toBe('jwt');
    sim.inject({ fault: 'status', status: 401, body: `bad token Bearer ${TOKEN}`, times: 1 });
    const error = await rejection(jwt.search({ q: 'jwt' }));
    expectNoSecret(error);
  });

  it('a token may go in another header', async () => {
    await using custom = createClient({ baseUrl: sim.url, token: TOKEN, tokenHeader: 'X-Jwt', tokenScheme: null });
    // The simulator only reads Authorization, so this is a 401: what matters is what was sent, and that it did not leak.
    const error = await rejection(custom.search({ q: 'x' }));
    expect(error).toMatchObject({ status: 401 });
    expectNoSecret(error);
  });

  it('not from validation errors of options', () => {
    const error = (() => {
      try {
        resolveClientOptions({ baseUrl: 'http://api.example.com/api/v1', apiKey: TEST_KEY, timeoutMs: 0 });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expectNoSecret(error);
    const multiline = (() => {
      try {
        resolveClientOptions({ baseUrl: sim.url, apiKey: `${TEST_KEY}\n` });
      } catch (e) {
        return e;
      }
    })();
    expect(String(multiline)).toContain('line breaks');
    expectNoSecret(multiline);
  });
});
