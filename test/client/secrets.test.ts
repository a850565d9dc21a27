import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalize, type RunEvent, searchPages, toCsv, toJsonl, toSqlite, ValidationError } from '../../src/index.ts';
import { createClient } from '../../src/client/index.ts';
import { type Simulator } from '../../src/simulator/index.ts';
import { resolveClientOptions } from '../../src/client/options.ts';
import { redactor, warmRedactors } from '../../src/redact.ts';
import { cli, envFor, ROOT } from '../cli-helpers.ts';
import { clientFor, rejection, simulator, TEST_KEY } from '../helpers.ts';
import { filesHolding, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const TOKEN = 'eyJhbGciOiJIUzI1NiJ9.test-token-payload.signature123';
// A key with the characters that encodings change: '/' (JSON's \/, %2F, &#47;) and '+' (%2B, base64's own alphabet).
const ECHO_KEY = 'sk_live/Ab+cd/EF9x8y7z6w5v4u3t2s1r';

let sim: Simulator;
beforeAll(async () => {
  sim = await simulator({ keys: [{ key: TEST_KEY, name: 'main' }, { token: TOKEN, name: 'jwt' }, { key: ECHO_KEY, name: 'echo' }] });
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

/**
 * The ways a server may echo `secret` (what the tests make the simulator send), written out here rather than taken from
 * src/redact.ts: JSON-escaped (with \/, or as \uXXXX), percent-encoded in either case, HTML entities, base64 at each of
 * the three byte alignments inside a blob, base64url.
 */
function echoes(secret: string): Record<string, string> {
  const each = (encode: (c: string) => string) => [...secret].map((c) => (/[A-Za-z0-9]/.test(c) ? c : encode(c))).join('');
  const code = (c: string, radix: number, width = 0) => (c.codePointAt(0) as number).toString(radix).padStart(width, '0');
  const blob = (before: string, format: 'base64' | 'base64url') => Buffer.from(`${before}${secret}!`).toString(format);
  return {
    json: JSON.stringify(secret).slice(1, -1).replaceAll('/', '\\/'),
    unicode: each((c) => `\\u${code(c, 16, 4).toUpperCase()}`),
    percent: encodeURIComponent(secret),
    percentLower: each((c) => `%${code(c, 16, 2)}`),
    htmlDecimal: each((c) => `&#${code(c, 10)};`),
    htmlHex: each((c) => `&#x${code(c, 16)};`),
    htmlNamed: secret.replaceAll('/', '&sol;').replaceAll('+', '&plus;').replaceAll('_', '&lowbar;'),
    base64: `auth ${blob('', 'base64')}`,
    base64Shifted: `auth ${blob('u:', 'base64')}`,
    base64Shifted2: `auth ${blob('usr:', 'base64')}`,
    base64url: `auth ${blob('u', 'base64url')}`,
  };
}

/** What must be found nowhere once `secret` was redacted: its first 8 characters, and every encoded form of it. */
function leakForms(secret: string): string[] {
  const cores = [0, 1, 2].map((offset) => {
    const encoded = Buffer.concat([Buffer.alloc(offset), Buffer.from(secret)]).toString('base64');
    // The characters made of the secret's own bits: the same whatever bytes surround it.
    return encoded.slice([0, 2, 3][offset], Math.floor(((offset + secret.length) * 8) / 6));
  });
  const forms = Object.entries(echoes(secret))
    .filter(([name]) => !name.startsWith('base64'))
    .map(([, form]) => form);
  return [secret.slice(0, 8), ...forms, ...cores, ...cores.map((core) => core.replaceAll('+', '-').replaceAll('/', '_'))];
}

function expectNoForm(text: string, secret: string) {
  for (const form of leakForms(secret)) expect(text, `holds ${form}`).not.toContain(form);
}

describe('a secret cut or encoded by the server is still redacted', () => {
  it('an error body cut at 4 KB inside the key keeps nothing of it (redacted first, then cut)', async () => {
    await using client = clientFor(sim);
    // The key straddles the excerpt's 4096th character; then a body whose read stops inside the key (2-byte characters).
    const bodies = [`${'x'.repeat(4086)}${TEST_KEY} and more`, `${'é'.repeat(4086)}${TEST_KEY} and more`];
    for (const body of bodies) {
      sim.inject({ fault: 'status', status: 500, body, times: 1 });
      const error = await rejection(client.search({ q: 'cut' }));
      expect((error as { body?: string }).body).toMatch(/\[redacted\]…$/);
      for (const text of renderings(error)) expectNoForm(text, TEST_KEY);
    }
  });

  it('a request id cut at 200 characters inside the key keeps nothing of it', async () => {
    await using client = clientFor(sim);
    sim.inject({ fault: 'status', status: 503, headers: { 'x-request-id': `${'r'.repeat(190)}${TEST_KEY}` }, times: 1 });
    const error = await rejection(client.search({ q: 'request id' }));
    expect((error as { requestId?: string }).requestId).toBe(`${'r'.repeat(190)}[redacted]`);
    for (const text of renderings(error)) expectNoForm(text, TEST_KEY);
  });

  it('redact.cut: a prefix of 8 characters or more left at the end of a cut counts as the key; a shorter one does not', () => {
    const redact = redactor([TEST_KEY]);
    expect(redact.cut(`error: ${TEST_KEY.slice(0, 8)}`, 100)).toBe('error: [redacted]');
    expect(redact.cut(`error: ${TEST_KEY.slice(0, 7)}`, 100)).toBe(`error: ${TEST_KEY.slice(0, 7)}`);
    expect(redact.cut(`error: ${TEST_KEY} trailing`, 12)).toBe('error: [reda');
    expect(redact.cut(`error: ${encodeURIComponent(ECHO_KEY)}`, 20)).toBe('error: sk_live%2FAb%');
    expect(redactor([ECHO_KEY]).cut(`error: ${encodeURIComponent(ECHO_KEY)}`, 20)).toBe('error: [redacted]');
  });

  it('redactors warmed ahead of their first use (a run compiles them while it waits on its database) redact and cut as before', () => {
    const secret = `warm_${TEST_KEY}`;
    const redact = redactor([secret, ECHO_KEY]);
    warmRedactors();
    warmRedactors();
    const text = `a ${secret} b ${encodeURIComponent(ECHO_KEY)} c ${Buffer.from(`x${secret}`).toString('base64')} d`;
    expect(redact(text)).toBe(redact(text));
    expect(redact(text)).not.toContain(secret.slice(4));
    expect(redact(text)).toMatch(/^a \[redacted\] b \[redacted\] c .*\[redacted\].* d$/);
    expect(redact.cut(`error: ${secret.slice(0, 9)}`, 100)).toBe('error: [redacted]');
    expect(redact.cut(`error: ${secret} trailing`, 12)).toBe('error: [reda');
  });

  it('one redactor for one set of secrets, in any order: a pool’s clients (each its own key first) share its patterns, compiled once', () => {
    const shared = redactor([TEST_KEY, ECHO_KEY, TOKEN]);
    // Before: a redactor each, whose patterns V8 compiled at their first use, 0.2 s each for three keys, on the run's thread.
    expect(redactor([ECHO_KEY, TOKEN, TEST_KEY, undefined, 'ab'])).toBe(shared);
    expect(redactor([TOKEN, TEST_KEY, ECHO_KEY, TEST_KEY])).toBe(shared);
    expect(redactor([TEST_KEY, ECHO_KEY])).not.toBe(shared);
    expect(shared(`${TOKEN} ${encodeURIComponent(ECHO_KEY)} ${TEST_KEY}`)).toBe('[redacted] [redacted] [redacted]');
    expect(shared.cut(`error: ${TEST_KEY.slice(0, 8)}`, 100)).toBe('error: [redacted]');
  });

  it('the key echoed JSON-escaped, percent-encoded, as HTML entities or in base64 is redacted from error bodies, Locations and request ids', async () => {
    await using client = clientFor(sim, { apiKey: ECHO_KEY });
    for (const [name, echo] of Object.entries(echoes(ECHO_KEY))) {
      sim.inject({ fault: 'status', status: 400, body: `{"error":{"message":"invalid key ${echo}"}}`, times: 1 });
      const error = await rejection(client.search({ q: name }));
      expect([name, error.message]).toEqual([name, expect.stringContaining('[redacted]')]);
      for (const text of renderings(error)) expectNoForm(text, ECHO_KEY);
    }
    for (const location of [`https://elsewhere.example/login?key=${encodeURIComponent(ECHO_KEY)}`, `https://elsewhere.example/#${echoes(ECHO_KEY).percentLower}`]) {
      sim.inject({ fault: 'redirect', location, times: 1 });
      sim.inject({ fault: 'status', status: 502, headers: { 'x-request-id': echoes(ECHO_KEY).base64url as string }, times: 1 });
      for (const error of [await rejection(client.search({ q: 'moved' })), await rejection(client.search({ q: 'request id' }))]) {
        for (const text of renderings(error)) expectNoForm(text, ECHO_KEY);
      }
    }
  });

  it('the key echoed in another case (a logged URL lowercased whole, a header uppercased) is redacted, whole or cut', async () => {
    const warnings: string[] = [];
    await using client = clientFor(sim, { apiKey: ECHO_KEY, onWarning: (message) => warnings.push(message) });
    const lowered = `https://api.example/api/v1/search?key=${encodeURIComponent(ECHO_KEY)}`.toLowerCase();
    const upper = ECHO_KEY.toUpperCase();
    sim.inject({ fault: 'status', status: 400, body: `{"error":{"message":"bad request ${lowered} from ${upper}"}}`, times: 1 });
    const error = await rejection(client.search({ q: 'lowered' }));
    expect(error.message).toContain('search?key=[redacted] from [redacted]');
    for (const text of renderings(error)) {
      for (const form of [ECHO_KEY, encodeURIComponent(ECHO_KEY)]) expect(text.toLowerCase()).not.toContain(form.toLowerCase());
    }
    sim.inject({ fault: 'status', status: 200, body: `{"data":[{"title":"logged ${lowered}","url":"https://a.example/"}]}`, times: 1 });
    const response = await client.search({ q: 'lowered 2xx' });
    expect(response.data[0]?.title).toBe('logged https://api.example/api/v1/search?key=[redacted]');
    expect(warnings).toEqual(['the server echoed the API key; it was redacted']);
    // A cut that leaves 8 characters or more of the lowered key counts as the key too.
    expect(redactor([ECHO_KEY]).cut(`error: ${ECHO_KEY.slice(0, 12).toLowerCase()}`, 100)).toBe('error: [redacted]');
  });

  it('so is a token (what the client sends as a credential), in base64 or JSON-escaped', async () => {
    await using jwt = createClient({ baseUrl: sim.url, token: TOKEN });
    for (const echo of [Buffer.from(`Bearer ${TOKEN}`).toString('base64'), JSON.stringify(TOKEN).replaceAll('.', '\\u002e')]) {
      sim.inject({ fault: 'status', status: 401, body: `credentials ${echo} refused`, times: 1 });
      const error = await rejection(jwt.search({ q: 'jwt' }));
      for (const text of renderings(error)) expectNoForm(text, TOKEN);
    }
  });

  it('a 2xx that echoes the key has it redacted before it is parsed (items, body, headers, request id), with one warning per client', async () => {
    const warnings: string[] = [];
    await using client = clientFor(sim, { apiKey: ECHO_KEY, onWarning: (message) => warnings.push(message) });
    const forms = echoes(ECHO_KEY);
    const body = `{"data":[{"title":"key ${forms.json}","url":"https://a.example/?k=${forms.percent}","snippet":"${forms.base64}"}],"debug":{"headers":"x-api-key: ${ECHO_KEY}"}}`;
    const headers = { 'x-request-id': forms.unicode as string, 'x-echo': ECHO_KEY, 'set-cookie': `k=${forms.percentLower}` };
    sim.inject({ fault: 'status', status: 200, body, headers, times: 2 });
    for (const q of ['echo one', 'echo two']) {
      const response = await client.search({ q });
      expect(response.data).toHaveLength(1);
      expect(response.data[0]?.title).toBe('key [redacted]');
      expect(response.requestId).toBe('[redacted]');
      expect(response.headers['x-echo']).toBe('[redacted]');
      expectNoForm(JSON.stringify(response), ECHO_KEY);
    }
    expect(warnings).toEqual(['the server echoed the API key; it was redacted']);
  });

  it('through run(): nothing of the key, in any encoding, reaches the state store, SQLite, CSV or JSONL; the run warns once', async () => {
    await using echoing = await simulator({ keys: [{ key: ECHO_KEY, name: 'echo' }] });
    using dir = workdir();
    const forms = echoes(ECHO_KEY);
    const page = (n: number) =>
      `{"data":[{"title":"echo ${forms.json} ${n}","url":"https://a.example/${n}?k=${forms.percent}","snippet":"${forms.base64Shifted}"},` +
      `{"title":"${forms.htmlDecimal}","url":"https://b.example/${n}#${forms.base64url}","snippet":"${forms.unicode}"}]}`;
    echoing.inject({ fault: 'status', status: 200, body: page(1), headers: { 'x-request-id': forms.percentLower as string }, match: { q: 'echo', page: 1 } });
    echoing.inject({ fault: 'status', status: 200, body: page(2), match: { q: 'echo', page: 2 } });
    // A failed series keeps its last error in the state store: one cut inside the key, one that is a Location.
    echoing.inject({ fault: 'status', status: 500, body: `${'x'.repeat(4086)}${ECHO_KEY} ${forms.json}`, match: { q: 'broken' } });
    echoing.inject({ fault: 'redirect', location: `https://elsewhere.example/?key=${forms.percent}`, match: { q: 'moved' } });
    const events: RunEvent[] = [];
    const summary = await runOn(
      echoing,
      {
        name: 'echo',
        source: searchPages({ queries: ['echo', 'broken', 'moved'], maxPages: 2, count: 2 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('echo.sqlite') }), toCsv({ path: dir.path('echo.csv') }), toJsonl({ path: dir.path('echo.jsonl') })],
        retry: { attempts: 1 },
      },
      { apiKey: ECHO_KEY, onEvent: (event) => events.push(event) },
    );
    for (const form of leakForms(ECHO_KEY)) expect([form, filesHolding(dir.dir, form)]).toEqual([form, []]);
    expectNoForm(JSON.stringify(summary), ECHO_KEY);
    expect(summary).toMatchObject({ status: 'failed_series', series: { failed: 2 }, items: { written: 4 } });
    expect(events.filter((event) => event.type === 'warning')).toEqual([{ type: 'warning', message: 'the server echoed the API key; it was redacted' }]);
    const errors = sqliteRows(dir.path('echo.sqlite'), 'SELECT error FROM series WHERE error IS NOT NULL ORDER BY query').map((row) => String(row.error));
    expect(errors).toEqual([expect.stringContaining('[redacted]…'), expect.stringContaining('[redacted]')]);
    expect(sqliteRows(dir.path('echo.sqlite')).map((row) => row.title)).toEqual(['echo [redacted] 1', '[redacted]', 'echo [redacted] 2', '[redacted]']);
  });
});

describe('a run’s own error is redacted before it is printed or stored', () => {
  // A signing secret as WEBDATA_WEBHOOK_SECRET holds it: whsec_ and the key's base64 (with '+' and '/' in it).
  const WEBHOOK_SECRET = `whsec_${Buffer.from('a stage error must never show ~~~ this key ???').toString('base64')}`;
  /** The webhook secret as a stage might show it: whole, its base64 part alone, the key it decodes to in hex or base64url. */
  const secretForms = (secret: string) => {
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    return [secret, secret.slice('whsec_'.length), key.toString('hex'), key.toString('base64url')];
  };

  it('a stage that throws the API key (in several encodings) and the webhook secret: stderr, runs.error, runs and runs --json hold neither', async () => {
    using dir = workdir();
    const leak = [
      'key=${key}', 'url=${encodeURIComponent(key)}', 'json=${JSON.stringify(key)}', "basic=${Buffer.from('u:' + key).toString('base64')}",
      'secret=${secret}', "raw=${secret.slice(6)}", "hex=${Buffer.from(secret.slice(6), 'base64').toString('hex')}", "b64url=${Buffer.from(secret.slice(6), 'base64').toString('base64url')}",
    ].join(' ');
    writeFileSync(
      dir.path('leaky.ts'),
      `import * as etl from ${JSON.stringify(join(ROOT, 'src/index.ts'))};
const key = process.env.WEBDATA_API_KEY ?? '';
const secret = process.env.WEBDATA_WEBHOOK_SECRET ?? '';
export default etl.definePipeline({
  name: 'leaky',
  source: etl.searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }),
  stages: [etl.normalize(), etl.mapItems(() => { throw new Error(\`the stage failed: ${leak}\`); })],
  sinks: [etl.toSqlite({ path: 'r.sqlite' })],
});
`,
    );
    const env = { ...envFor(sim.url, ECHO_KEY), WEBDATA_WEBHOOK_SECRET: WEBHOOK_SECRET };
    const failed = await cli(['run', 'leaky.ts'], { cwd: dir.dir, env });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('the stage failed: key=[redacted] url=[redacted]');
    const stored = sqliteRows(dir.path('r.sqlite'), 'SELECT status, error FROM runs');
    expect(stored).toEqual([{ status: 'interrupted', error: expect.stringContaining('the stage failed: key=[redacted]') }]);
    const listed = await cli(['runs', dir.path('r.sqlite')], { cwd: dir.dir });
    const json = await cli(['runs', dir.path('r.sqlite'), '--json'], { cwd: dir.dir });
    expect(listed.stdout).toContain('the stage failed');
    expect(json.stdout).toContain('the stage failed');
    for (const text of [failed.stderr + failed.stdout, String(stored[0]?.error), listed.stdout + listed.stderr, json.stdout + json.stderr]) {
      expectNoForm(text, ECHO_KEY);
      for (const form of secretForms(WEBHOOK_SECRET)) expect(text, `holds ${form}`).not.toContain(form);
    }
    for (const form of [ECHO_KEY, ...secretForms(WEBHOOK_SECRET)]) expect(filesHolding(dir.dir, form)).toEqual([]);
  });
});
