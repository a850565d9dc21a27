import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, searchPages, toCsv, toPostgres, toSqlite, ValidationError } from '../../src/index.ts';
import type { Notification } from '../../src/run/notification.ts';
import { verifyWebhookSignature } from '../../src/notify/sign.ts';
import { DIGEST_LIST_LIMIT } from '../../src/notify/digest.ts';
import { deliver } from '../../src/notify/deliver.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { simulator, TEST_KEY, until } from '../helpers.ts';
import { filesHolding, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { fast, KEY, libraryVerifies, notifying, type Received, receiver, SECRET, URL_TOKEN } from './webhook-helpers.ts';

describe('webhooks when a run ends', () => {
  it('POSTs the run summary and a digest, signed as Standard Webhooks (id, time, HMAC of both and the body) so that the standardwebhooks library verifies it; records the delivery', async () => {
    await using sim = await simulator();
    await using hook = await receiver();
    using dir = workdir();
    const { summary, events, notifications } = await notifying(sim, {
      name: 'told',
      source: searchPages({ queries: ['a', 'b'], countries: ['us'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      notify: { webhooks: [{ url: hook.url }] },
    });
    expect(summary.status).toBe('completed');
    expect(hook.received).toHaveLength(1);
    const [{ headers, body }] = hook.received as [Received];
    expect(headers['content-type']).toBe('application/json');
    expect(headers['user-agent']).toMatch(/^webdata-etl\/\d+\.\d+\.\d+/);
    // Standard Webhooks: the id (the end's idempotency key), the attempt's time, v1 and the HMAC of id.time.body.
    expect(headers['webhook-id']).toBe(`${summary.runId}#1`);
    expect(Math.abs(Number(headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(120);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(headers).not.toHaveProperty('idempotency-key');
    expect(libraryVerifies(hook.received[0] as Received)).toMatchObject({ runId: summary.runId });
    expect(verifyWebhookSignature(body, headers, SECRET)).toEqual({ ok: true, id: `${summary.runId}#1`, timestamp: Number(headers['webhook-timestamp']) });
    const otherSecret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    expect(verifyWebhookSignature(body, headers, otherSecret)).toEqual({ ok: false, reason: 'no signature matches' });
    expect(verifyWebhookSignature(Buffer.concat([body, Buffer.from(' ')]), headers, SECRET)).toEqual({ ok: false, reason: 'no signature matches' });

    const [sent] = hook.bodies() as [Notification];
    expect(sent).toMatchObject({ type: 'run.ended', idempotencyKey: `${summary.runId}#1`, runId: summary.runId, invocation: 1, pipeline: 'told', event: 'completed', status: 'completed' });
    // The summary as run() returned it and the runs table keeps it.
    expect(sent.summary).toEqual(summary);
    expect(JSON.parse(String(sqliteRows(dir.path('r.sqlite'), 'SELECT summary FROM runs')[0]?.summary))).toEqual(sent.summary);
    expect(sent.digest).toMatchObject({ table: 'results', since: null, series: [], failedSeries: [], notes: ['the first run in results: nothing to compare with'] });

    expect(notifications).toEqual([{ type: 'notification', runId: summary.runId, webhook: hook.shown, event: 'completed', status: 'delivered', attempts: 1 }]);
    expect(sqliteRows(dir.path('r.sqlite'), 'SELECT run_id, invocation, target, event, status, attempts, error, body FROM notifications')).toEqual([
      { run_id: summary.runId, invocation: 1, target: hook.shown, event: 'completed', status: 'delivered', attempts: 1, error: null, body: null },
    ]);

    // Neither the API key nor the secret, nor the webhook's token, anywhere: body, headers, events, files.
    const everything = JSON.stringify({ body: body.toString('utf8'), headers, events, summary });
    for (const secret of [TEST_KEY, SECRET]) expect(everything).not.toContain(secret);
    expect(JSON.stringify({ events, summary })).not.toContain(URL_TOKEN);
    expect(filesHolding(dir.dir, SECRET)).toEqual([]);
    expect(filesHolding(dir.dir, URL_TOKEN)).toEqual([]);
  });

  it('a receiver that answers 500 twice is sent the same bytes again, and takes it on the third attempt', async () => {
    await using sim = await simulator();
    await using hook = await receiver((n) => (n <= 2 ? 500 : 200));
    using dir = workdir();
    const { summary, notifications } = await notifying(sim, {
      name: 'retried',
      source: searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      notify: { webhooks: [{ url: hook.url, retry: fast }] },
    });
    expect(summary.status).toBe('completed');
    expect(hook.received).toHaveLength(3);
    const [first, ...again] = hook.received as [Received, Received, Received];
    for (const attempt of again) {
      expect(attempt.body.equals(first.body)).toBe(true);
      // The same id at every attempt; each signed at its own time.
      expect(attempt.headers['webhook-id']).toBe(`${summary.runId}#1`);
      expect(libraryVerifies(attempt)).toMatchObject({ runId: summary.runId });
    }
    expect(notifications.map((event) => [event.status, event.attempts, event.error])).toEqual([
      ['retrying', 1, 'HTTP 500'],
      ['retrying', 2, 'HTTP 500'],
      ['delivered', 3, undefined],
    ]);
    expect(sqliteRows(dir.path('r.sqlite'), 'SELECT status, attempts, error FROM notifications')).toEqual([{ status: 'delivered', attempts: 3, error: null }]);
  });

  it('a receiver that never answers costs attempts × timeout: the run ends as it would have, the failure is recorded, and runs shows it', async () => {
    await using sim = await simulator();
    await using hook = await receiver(() => 'hang');
    using dir = workdir();
    const pipeline = {
      name: 'unheard',
      source: searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      notify: { webhooks: [{ url: hook.url, timeoutMs: 100, retry: { attempts: 3, ...fast } }] },
    };
    const started = Date.now();
    const { summary, notifications } = await notifying(sim, pipeline);
    expect(summary.status).toBe('completed');
    expect(hook.received).toHaveLength(3);
    // 3 × 100 ms and two waits of at most 5 ms: well under what a run on the simulator takes on a loaded machine.
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(notifications.at(-1)).toEqual({ type: 'notification', runId: summary.runId, webhook: hook.shown, event: 'completed', status: 'failed', attempts: 3, error: 'no answer within 100 ms' });
    expect(sqliteRows(dir.path('r.sqlite'), 'SELECT status, attempts, error, body FROM notifications')).toEqual([{ status: 'failed', attempts: 3, error: 'no answer within 100 ms', body: null }]);

    const table = await cli(['runs', dir.path('r.sqlite')], { cwd: dir.dir });
    expect(table.code).toBe(0);
    expect(table.stdout).toContain(`webhook ${hook.shown} failed after 3 attempts (no answer within 100 ms)`);
    expect(table.stdout).not.toContain(URL_TOKEN);
    const [listed] = (await cli(['runs', dir.path('r.sqlite'), '--json'], { cwd: dir.dir })).stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(listed).toMatchObject({ runId: summary.runId, status: 'completed', notifications: [{ invocation: 1, webhook: hook.shown, event: 'completed', status: 'failed', attempts: 3, error: 'no answer within 100 ms' }] });
  });

  it('on: a completed run does not notify a webhook that asked for failures only; a failed one does, listing its failed series', async () => {
    await using sim = await simulator();
    await using failures = await receiver();
    await using everything = await receiver();
    using dir = workdir();
    const pipeline = {
      name: 'filtered',
      source: searchPages({ queries: ['bad', 'good'], countries: ['us'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      notify: { webhooks: [{ url: failures.url, on: ['failed' as const] }, { url: everything.url }] },
    };
    expect((await notifying(sim, pipeline)).summary.status).toBe('completed');
    expect([failures.received.length, everything.received.length]).toEqual([0, 1]);

    sim.inject({ fault: 'status', status: 400, match: { q: 'bad' } });
    const { summary } = await notifying(sim, pipeline);
    expect(summary.status).toBe('failed_series');
    expect([failures.received.length, everything.received.length]).toEqual([1, 2]);
    const [sent] = failures.bodies() as [Notification];
    expect(sent).toMatchObject({ event: 'failed', status: 'failed_series', idempotencyKey: `${summary.runId}#1` });
    expect(sent.digest.failedSeries).toEqual([{ endpoint: '/searchengine/search', query: 'bad', country: 'us', lang: '', errorKind: 'bad_request', error: expect.stringContaining('400') }]);
    expect(sent.digest.counts.failedSeries).toBe(1);
    expect(sent.digest.omitted.failedSeries).toBe(0);
  });

  it('without a whsec_ WEBDATA_WEBHOOK_SECRET (unset, blank, an old hex secret, not base64, too short a key) the run is refused before any request', async () => {
    await using sim = await simulator();
    await using hook = await receiver();
    using dir = workdir();
    const pipeline = {
      name: 'unsigned',
      source: searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toCsv({ path: dir.path('r.csv') })],
      notify: { webhooks: [{ url: hook.url }] },
    };
    const refused = {
      '': 'set WEBDATA_WEBHOOK_SECRET in the environment',
      '  ': 'set WEBDATA_WEBHOOK_SECRET in the environment',
      // What the docs said to make before (`openssl rand -hex 32`): receivers decode the secret, so it is refused.
      '9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0': 'WEBDATA_WEBHOOK_SECRET must be a Standard Webhooks secret, "whsec_" followed by the base64',
      'whsec_not*base64!': 'WEBDATA_WEBHOOK_SECRET: what follows "whsec_" must be base64',
      [`whsec_${Buffer.alloc(16, 1).toString('base64')}`]: 'WEBDATA_WEBHOOK_SECRET must stand for 24 to 64 bytes; it stands for 16',
    };
    for (const [secret, message] of Object.entries(refused)) {
      const error = await runOn(sim, pipeline, { env: { WEBDATA_ALLOWED_HOSTS: '127.0.0.1', ...(secret === '' ? {} : { WEBDATA_WEBHOOK_SECRET: secret }) } }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).issues).toEqual([{ path: 'notify.webhooks', message: expect.stringContaining(message) }]);
      // How to make one, and never the secret given.
      expect((error as ValidationError).message).toContain(`make one with node -e "console.log('whsec_' + require('node:crypto').randomBytes(32).toString('base64'))"`);
      if (secret.trim() !== '') expect((error as ValidationError).message).not.toContain(secret.replace(/^whsec_/, ''));
    }
    expect(sim.stats().requests).toBe(0);
    expect(hook.received).toHaveLength(0);

    const file = config(dir.dir, { notify: { webhooks: [{ url: hook.url }] } });
    const unset = await cli(['run', file], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_ALLOWED_HOSTS: '127.0.0.1' } });
    expect(unset.code).toBe(2);
    expect(unset.stderr).toContain('notify.webhooks: set WEBDATA_WEBHOOK_SECRET in the environment');
    expect(unset.stderr).not.toContain(URL_TOKEN);
    const old = await cli(['run', file], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_ALLOWED_HOSTS: '127.0.0.1', WEBDATA_WEBHOOK_SECRET: 'an-old-secret-of-32-characters!!' } });
    expect(old.code).toBe(2);
    expect(old.stderr).toContain('notify.webhooks: WEBDATA_WEBHOOK_SECRET must be a Standard Webhooks secret');
    expect(old.stderr).not.toContain('an-old-secret-of-32-characters!!');
    expect(sim.stats().requests).toBe(0);
  });

  it('a webhook obeys the API’s host rules: https or loopback http, no credentials, WEBDATA_ALLOWED_HOSTS; a secret in the file is refused', async () => {
    await using sim = await simulator();
    await using hook = await receiver();
    using dir = workdir();
    const base = { name: 'hosts', source: searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }), stages: [normalize()], sinks: [toCsv({ path: dir.path('r.csv') })] };
    const refusal = (notify: unknown) => {
      try {
        definePipeline({ ...base, notify } as never);
      } catch (error) {
        return (error as ValidationError).issues;
      }
      return [];
    };
    expect(refusal({ webhooks: [{ url: 'http://hooks.example.com/x' }] })).toEqual([{ path: 'notify.webhooks.0.url', message: expect.stringMatching(/must use https .*loopback/) }]);
    expect(refusal({ webhooks: [{ url: 'https://user:pw@hooks.example.com/x' }] })).toEqual([{ path: 'notify.webhooks.0.url', message: expect.stringContaining('must not carry credentials') }]);
    expect(refusal({ webhooks: [{ url: 'https://hooks.example.com/x', secret: SECRET }] })).toEqual([{ path: 'notify.webhooks.0.secret', message: expect.stringContaining('set WEBDATA_WEBHOOK_SECRET') }]);
    expect(refusal({ webhooks: [{ url: 'https://hooks.example.com/x', on: ['done'], minRankMove: 0 }] }).map((issue) => issue.path)).toEqual(['notify.webhooks.0.on.0', 'notify.webhooks.0.minRankMove']);
    expect(refusal({ webhooks: [{ url: 'https://hooks.example.com/x', timeoutMs: 60_000, retry: { attempts: 10 } }] })).toEqual([
      { path: 'notify.webhooks.0', message: expect.stringContaining('must fit 5 minutes') },
    ]);
    expect(JSON.stringify(refusal({ webhooks: [{ url: `ftp://hooks.example.com/x?token=${URL_TOKEN}` }] }))).not.toContain(URL_TOKEN);

    const pipeline = { ...base, notify: { webhooks: [{ url: hook.url }] } };
    // The API by the name localhost, which the list allows; the webhook at 127.0.0.1, which it does not.
    const baseUrl = sim.url.replace('127.0.0.1', 'localhost');
    const error = await runOn(sim, pipeline, { baseUrl, env: { WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: 'localhost' } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).issues).toEqual([{ path: 'notify.webhooks.0.url', message: expect.stringContaining('is not among WEBDATA_ALLOWED_HOSTS (localhost)') }]);
    expect(sim.stats().requests).toBe(0);
    // Listed, it is sent to.
    const { summary } = await notifying(sim, pipeline, { baseUrl, env: { WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: 'localhost, 127.0.0.1' } });
    expect(summary.status).toBe('completed');
    expect(hook.received).toHaveLength(1);

    // --simulator admits the simulator's own host (127.0.0.1) for the run: the list still holds for other hosts.
    const file = config(dir.dir, { notify: { webhooks: [{ url: 'https://hooks.example.org/webdata' }] } }, { queries: ['a'], countries: ['us'], maxPages: 1 });
    const simulated = await cli(['run', file, '--simulator'], { cwd: dir.dir, env: { WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: 'api.example.com' } });
    expect(simulated.code).toBe(2);
    expect(simulated.stderr).toContain('notify.webhooks.0.url: https://hooks.example.org is not among WEBDATA_ALLOWED_HOSTS (api.example.com, 127.0.0.1)');
  });
});

describe('delivery', () => {
  const delivery = (url: string, onRetry?: (attempt: number, error: string, waitMs: number) => void) =>
    deliver({ hook: { url, timeoutMs: 2_000, retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 20 } }, body: '{"a":1}', key: KEY, id: 'run#1', allowed: ['127.0.0.1'], onRetry });

  it('a 429 or 408 is tried again, its Retry-After honoured up to maxDelayMs; a redirect or another 4xx is not', async () => {
    await using limited = await receiver((n) => (n === 1 ? { status: 429, headers: { 'retry-after': '3600' } } : n === 2 ? 408 : 200));
    const waits: number[] = [];
    expect(await delivery(limited.url, (_attempt, _error, waitMs) => waits.push(waitMs))).toEqual({ status: 'delivered', attempts: 3, httpStatus: 200 });
    // An hour asked for; the most a wait may be is 20 ms.
    expect(waits[0]).toBe(20);
    expect(waits[1]).toBeLessThanOrEqual(2);

    await using moved = await receiver(() => ({ status: 302, headers: { location: 'https://elsewhere.example/' } }));
    expect(await delivery(moved.url)).toEqual({ status: 'failed', attempts: 1, error: expect.stringContaining('HTTP 302 (redirects are not followed') });
    expect(moved.received).toHaveLength(1);
    await using refused = await receiver(() => 401);
    expect(await delivery(refused.url)).toEqual({ status: 'failed', attempts: 1, error: 'HTTP 401' });

    // Nobody listening: a network error, said by its code, never with the URL (and its token).
    const closed = `http://127.0.0.1:${new URL(refused.url).port}/gone?token=${URL_TOKEN}`;
    await refused[Symbol.asyncDispose]();
    const outcome = await delivery(closed);
    expect(outcome).toEqual({ status: 'failed', attempts: 3, error: 'network error (ECONNREFUSED)' });
  });
});

describe('the digest of what changed', () => {
  /** Rows of the changes view, sorted into the digest's lists by the digest's rules, independently of its SQL. */
  function expectedFrom(file: string, top: number, minRankMove: number) {
    const rows = sqliteRows(file, 'SELECT query, country, lang, url, title, previous_rank, current_rank, rank_delta, change FROM report_changes');
    const entry = (row: (typeof rows)[number]) => ({ url: row.url, title: row.title, rank: row.current_rank, previousRank: row.previous_rank });
    const lists = { entered: [] as typeof rows, left: [] as typeof rows, moved: [] as typeof rows };
    for (const row of rows) {
      const [prev, cur] = [row.previous_rank as number | null, row.current_rank as number | null];
      if ((row.change === 'new' || row.change === 'up') && cur !== null && cur <= top && (prev === null || prev > top)) lists.entered.push(row);
      else if ((row.change === 'lost' || row.change === 'down') && prev !== null && prev <= top && (cur === null || cur > top)) lists.left.push(row);
      else if ((row.change === 'up' || row.change === 'down') && cur !== null && prev !== null && cur <= top && prev <= top && Math.abs(row.rank_delta as number) >= minRankMove) lists.moved.push(row);
    }
    return { lists, entry };
  }

  it('after two runs whose rankings drifted: entered, left and moved per query and country, as the changes view has them', async () => {
    let now = 1_000;
    // Drift every millisecond of a clock the test moves: the second run sees other rankings, always the same ones.
    await using sim = await simulator({ driftEveryMs: 1, epoch: () => now, resultsPerQuery: 30 });
    await using hook = await receiver();
    using dir = workdir();
    const [top, minRankMove] = [5, 1];
    const pipeline = {
      name: 'drifting',
      source: searchPages({ queries: ['coffee', 'tea', 'juice'], countries: ['us', 'de'], maxPages: 2 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      notify: { webhooks: [{ url: hook.url, top, minRankMove }] },
    };
    const first = (await notifying(sim, pipeline)).summary;
    now = 2_000;
    const second = (await notifying(sim, pipeline)).summary;
    const [, sent] = hook.bodies() as [Notification, Notification];
    expect(sent).toMatchObject({ runId: second.runId, digest: { table: 'results', since: first.runId, top, minRankMove, notes: [], failedSeries: [] } });

    const { lists, entry } = expectedFrom(dir.path('r.sqlite'), top, minRankMove);
    const { digest } = sent;
    expect(digest.counts).toEqual({ entered: lists.entered.length, left: lists.left.length, moved: lists.moved.length, failedSeries: 0 });
    expect(digest.omitted).toEqual({ entered: 0, left: 0, moved: 0, failedSeries: 0 });
    // Something of each, with these fixed drifts; each listed under its query and country.
    expect(Math.min(digest.counts.entered, digest.counts.left, digest.counts.moved)).toBeGreaterThan(0);
    for (const kind of ['entered', 'left', 'moved'] as const) {
      const listed = digest.series.flatMap((series) => series[kind].map((each) => ({ query: series.query, country: series.country, ...each })));
      const want = lists[kind].map((row) => ({ query: row.query, country: row.country, ...entry(row) }));
      const order = (a: { query: unknown; country: unknown; url: unknown }, b: typeof a) => JSON.stringify([a.query, a.country, a.url]).localeCompare(JSON.stringify([b.query, b.country, b.url]));
      expect(listed.sort(order)).toEqual(want.sort(order));
    }
    for (const series of digest.series) {
      for (const moved of series.moved) expect(Math.abs((moved.previousRank as number) - (moved.rank as number))).toBeGreaterThanOrEqual(minRankMove);
      for (const entered of series.entered) expect(entered.rank).toBeLessThanOrEqual(top);
    }
  });

  it('each list is bounded, with counts of what it leaves out', async () => {
    await using before = await simulator({ seed: 1, resultsPerQuery: 20 });
    // Another seed: other URLs everywhere, so that every URL of the top N left it and another entered.
    await using after = await simulator({ seed: 2, resultsPerQuery: 20 });
    await using hook = await receiver();
    using dir = workdir();
    const top = 20;
    const queries = Array.from({ length: 4 }, (_, i) => `query ${i}`);
    const pipeline = {
      name: 'bounded',
      source: searchPages({ queries, countries: ['us', 'gb'], count: 20, maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      notify: { webhooks: [{ url: hook.url, top }] },
    };
    await notifying(before, pipeline);
    await notifying(after, pipeline);
    const { digest } = (hook.bodies() as [Notification, Notification])[1];
    const { lists } = expectedFrom(dir.path('r.sqlite'), top, 3);
    expect(lists.entered.length).toBeGreaterThan(DIGEST_LIST_LIMIT);
    expect(digest.counts.entered).toBe(lists.entered.length);
    expect(digest.counts.left).toBe(lists.left.length);
    const listed = (kind: 'entered' | 'left') => digest.series.reduce((n, series) => n + series[kind].length, 0);
    expect(listed('entered')).toBe(DIGEST_LIST_LIMIT);
    expect(digest.omitted.entered).toBe(lists.entered.length - DIGEST_LIST_LIMIT);
    expect(listed('left')).toBe(Math.min(DIGEST_LIST_LIMIT, lists.left.length));
    expect(digest.omitted.left).toBe(lists.left.length - listed('left'));
    // The first of the list are kept, series by series.
    expect(digest.series[0]).toMatchObject({ query: 'query 0', country: 'gb' });
  });

  it('a pipeline with only files has a digest of its failed series, and says why nothing else', async () => {
    await using sim = await simulator();
    await using hook = await receiver();
    using dir = workdir();
    sim.inject({ fault: 'status', status: 400, match: { q: 'bad' } });
    await notifying(sim, {
      name: 'files',
      source: searchPages({ queries: ['bad', 'good'], countries: ['us'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toCsv({ path: dir.path('r.csv') })],
      notify: { webhooks: [{ url: hook.url }] },
    });
    const [{ digest }] = hook.bodies() as [Notification];
    expect(digest).toMatchObject({ table: null, since: null, series: [], failedSeries: [{ query: 'bad' }], counts: { failedSeries: 1 } });
    expect(digest.notes).toEqual([expect.stringContaining('no results table with a changes view')]);
  });
});

describe('at least once', () => {
  it('a notification recorded but not sent when the process was killed is sent by the next run, the same bytes under the same key', async () => {
    await using sim = await simulator();
    await using hook = await receiver();
    using dir = workdir();
    const file = config(dir.dir, { notify: { webhooks: [{ url: hook.url }] } }, { queries: ['x'], countries: ['us'], maxPages: 1 });
    const env = { ...envFor(sim.url), WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: '127.0.0.1' };
    const killed = await cli(['run', file], { cwd: dir.dir, env: { ...env, WEBDATA_CRASH_AT: 'notification-claimed' } });
    expect(killed.code).toBeNull();
    expect(hook.received).toHaveLength(0);
    const [owed] = sqliteRows(dir.path('out/results.sqlite'), "SELECT run_id, body FROM notifications WHERE status = 'pending'");
    expect(owed?.body).toEqual(expect.any(String));
    const pending = await cli(['runs', file], { cwd: dir.dir });
    expect(pending.stdout).toContain(`webhook ${hook.shown} pending`);

    const next = await cli(['run', file, '--quiet'], { cwd: dir.dir, env });
    expect(next.code).toBe(0);
    // Quiet: the deliveries went well, so nothing was said.
    expect(next.stderr).toBe('');
    expect(hook.received).toHaveLength(2);
    const earlier = hook.received.find((r) => r.headers['webhook-id'] === `${owed?.run_id}#1`);
    expect(earlier?.body.toString('utf8')).toBe(owed?.body);
    // Signed when it was sent, not when it was recorded: a receiver's 5 minutes run from the delivery.
    expect(libraryVerifies(earlier as Received)).toMatchObject({ runId: owed?.run_id });
    const current = JSON.parse(next.stdout) as { runId: string };
    expect(hook.received.map((r) => r.headers['webhook-id']).sort()).toEqual([`${owed?.run_id}#1`, `${current.runId}#1`].sort());
    expect(sqliteRows(dir.path('out/results.sqlite'), 'SELECT status, body FROM notifications ORDER BY created_at')).toEqual([
      { status: 'delivered', body: null },
      { status: 'delivered', body: null },
    ]);
  });

  it('a delivery aborted (a second Ctrl-C) stays pending, and the next run sends it', async () => {
    await using sim = await simulator();
    await using hook = await receiver((n) => (n === 1 ? 'hang' : 200));
    using dir = workdir();
    const pipeline = {
      name: 'aborted',
      source: searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      notify: { webhooks: [{ url: hook.url, retry: fast }] },
    };
    const abort = new AbortController();
    const aborting = until(() => hook.received.length === 1).then(() => abort.abort());
    const first = await notifying(sim, pipeline, { abortSignal: abort.signal });
    await aborting;
    expect(first.summary.status).toBe('completed');
    expect(first.notifications.map((event) => event.status)).toEqual(['aborted']);
    expect(sqliteRows(dir.path('r.sqlite'), 'SELECT status, attempts FROM notifications')).toEqual([{ status: 'pending', attempts: 1 }]);

    const second = await notifying(sim, pipeline);
    expect(hook.received.map((r) => r.headers['webhook-id']).sort()).toEqual([`${first.summary.runId}#1`, `${first.summary.runId}#1`, `${second.summary.runId}#1`].sort());
    expect(hook.received[1]?.body.equals(hook.received[0]?.body as Buffer)).toBe(true);
    expect(sqliteRows(dir.path('r.sqlite'), 'SELECT run_id, status, attempts FROM notifications ORDER BY created_at')).toEqual([
      { run_id: first.summary.runId, status: 'delivered', attempts: 2 },
      { run_id: second.summary.runId, status: 'delivered', attempts: 1 },
    ]);
  });

  it('quiet: a delivery that failed is said all the same; the run’s exit code is its own', async () => {
    await using sim = await simulator();
    await using hook = await receiver(() => 404);
    using dir = workdir();
    const file = config(dir.dir, { notify: { webhooks: [{ url: hook.url }] } }, { queries: ['x'], countries: ['us'], maxPages: 1 });
    const result = await cli(['run', file, '--quiet'], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: '127.0.0.1' } });
    expect(result.code).toBe(0);
    // A 404 is not tried again.
    expect(hook.received).toHaveLength(1);
    expect(result.stderr.trim()).toBe(`webhook ${hook.shown}: not delivered after 1 attempt (HTTP 404): recorded, shown by webdata-etl runs`);
    expect(readFileSync(file, 'utf8')).toContain(URL_TOKEN);
    expect(result.stderr + result.stdout).not.toContain(URL_TOKEN);
    expect(result.stderr + result.stdout).not.toContain(SECRET);
  });
});

describePostgres('notifications of a run in PostgreSQL', () => {
  it('a run worked by two processes is told of once, by one of them; the digest comes from the PostgreSQL view', async () => {
    let now = 1_000;
    await using sim = await simulator({ driftEveryMs: 1, epoch: () => now, resultsPerQuery: 30 });
    await using hook = await receiver();
    const db = await testDatabase();
    try {
      const [top, minRankMove] = [5, 1];
      // Each worker its own pipeline object, as two processes would have: a sink is opened and closed by one run.
      const pipeline = () => ({
        name: 'pg-told',
        source: searchPages({ queries: ['coffee', 'tea', 'juice', 'water'], countries: ['us', 'de'], maxPages: 2 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'results' })],
        notify: { webhooks: [{ url: hook.url, top, minRankMove }] },
      });
      // Two workers of one run (its state and rows in one database): each records the run's end, one tells of it.
      const first = await Promise.all([notifying(sim, pipeline()), notifying(sim, pipeline())]);
      expect(new Set(first.map((worker) => worker.summary.runId)).size).toBe(1);
      expect(hook.received).toHaveLength(1);
      expect(first.flatMap((worker) => worker.notifications.map((event) => event.status))).toEqual(['delivered']);
      now = 2_000;
      const second = await Promise.all([notifying(sim, pipeline()), notifying(sim, pipeline())]);
      expect(hook.received).toHaveLength(2);
      const [, sent] = hook.bodies() as [Notification, Notification];
      const runId = second[0]?.summary.runId;
      expect(sent).toMatchObject({ runId, event: 'completed', digest: { table: 'results', since: first[0]?.summary.runId, notes: [] } });
      expect(libraryVerifies(hook.received[1] as Received)).toMatchObject({ runId });

      const rows = await sql(db.url, 'SELECT previous_rank, current_rank, rank_delta, change FROM public.report_changes');
      const count = (test: (prev: number | null, cur: number | null, delta: number | null, change: string) => boolean) =>
        rows.filter((row) => test(row.previous_rank as number | null, row.current_rank as number | null, row.rank_delta as number | null, row.change as string)).length;
      expect(sent.digest.counts).toEqual({
        entered: count((prev, cur, _d, change) => (change === 'new' || change === 'up') && cur !== null && cur <= top && (prev === null || prev > top)),
        left: count((prev, cur, _d, change) => (change === 'lost' || change === 'down') && prev !== null && prev <= top && (cur === null || cur > top)),
        moved: count((prev, cur, delta, change) => (change === 'up' || change === 'down') && prev !== null && cur !== null && prev <= top && cur <= top && Math.abs(delta ?? 0) >= minRankMove),
        failedSeries: 0,
      });
      expect(sent.digest.counts.moved).toBeGreaterThan(0);
      expect(await sql(db.url, 'SELECT run_id, invocation, status, attempts, body FROM webdata.notifications ORDER BY created_at')).toEqual([
        { run_id: first[0]?.summary.runId, invocation: 1, status: 'delivered', attempts: 1, body: null },
        { run_id: runId, invocation: 1, status: 'delivered', attempts: 1, body: null },
      ]);
      const listed = await cli(['runs', '--database-url', db.url, '--json'], { cwd: process.cwd() });
      expect(listed.stdout.trim().split('\n').map((line) => JSON.parse(line).notifications.map((n: { status: string }) => n.status))).toEqual([['delivered'], ['delivered']]);
    } finally {
      await db.drop();
    }
  });
});
