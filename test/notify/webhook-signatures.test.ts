import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { normalize, searchPages, toSqlite } from '../../src/index.ts';
import { deliver } from '../../src/notify/deliver.ts';
import { verifyWebhookSignature } from '../../src/notify/sign.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { simulator, until } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { documentedReceiver, fast, KEY, libraryVerifies, notifying, pick, type Received, receiver, SECRET } from './webhook-helpers.ts';

describe('Standard Webhooks: what a replay meets', () => {
  /** One run's end delivered to `urls` (the first a recording receiver's): the run's summary. */
  async function oneEnd(sim: Simulator, dir: { path: (name: string) => string }, urls: string[]) {
    const { summary } = await notifying(sim, {
      name: 'replayed',
      source: searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('r.sqlite') })],
      notify: { webhooks: urls.map((url) => ({ url, retry: fast })) },
    });
    return summary;
  }

  it('a delivery replayed 6 minutes later is refused for its time, by verifyWebhookSignature and by the standardwebhooks library; under another id or time, for its signature', async () => {
    await using sim = await simulator();
    await using hook = await receiver();
    using dir = workdir();
    const summary = await oneEnd(sim, dir, [hook.url]);
    const sent = hook.received[0] as Received;
    const sentAt = Number(sent.headers['webhook-timestamp']);
    // Within the tolerance, both take it (the id then tells a repeat).
    expect(verifyWebhookSignature(sent.body, sent.headers, SECRET, { now: (sentAt + 240) * 1000 })).toEqual({ ok: true, id: `${summary.runId}#1`, timestamp: sentAt });
    // Six minutes later: too old.
    expect(verifyWebhookSignature(sent.body, sent.headers, SECRET, { now: (sentAt + 360) * 1000 })).toEqual({ ok: false, reason: 'too old: sent 360 s ago (at most 300 s)' });
    vi.useFakeTimers({ toFake: ['Date'], now: (sentAt + 360) * 1000 });
    try {
      expect(() => libraryVerifies(sent)).toThrow('Message timestamp too old');
    } finally {
      vi.useRealTimers();
    }
    // The replay the issue found: the same signed body under a new key. The id is signed: refused by both.
    const renamed = { ...sent, headers: { ...sent.headers, 'webhook-id': `${summary.runId}#2` } };
    expect(verifyWebhookSignature(renamed.body, renamed.headers, SECRET)).toEqual({ ok: false, reason: 'no signature matches' });
    expect(() => libraryVerifies(renamed)).toThrow('No matching signature found');
    // An old delivery given a new time, to pass the tolerance: refused by both.
    const retimed = { ...sent, headers: { ...sent.headers, 'webhook-timestamp': String(sentAt + 1) } };
    expect(verifyWebhookSignature(retimed.body, retimed.headers, SECRET)).toEqual({ ok: false, reason: 'no signature matches' });
    expect(() => libraryVerifies(retimed)).toThrow('No matching signature found');
    // Headers missing, or a fetch Headers object: read alike.
    expect(verifyWebhookSignature(sent.body, { 'webhook-id': `${summary.runId}#1` }, SECRET)).toMatchObject({ ok: false, reason: expect.stringContaining('missing') });
    expect(verifyWebhookSignature(sent.body, new Headers(sent.headers as Record<string, string>), SECRET)).toMatchObject({ ok: true });
    expect(() => verifyWebhookSignature(sent.body, sent.headers, 'not-a-whsec-secret')).toThrow('must be a Standard Webhooks secret');
  });

  it('the docs’ receiver processes a notification once: the same request replayed is answered and dropped, one under another id or 6 minutes old is refused', async () => {
    await using sim = await simulator();
    await using hook = await receiver();
    await using docs = await documentedReceiver();
    using dir = workdir();
    const summary = await oneEnd(sim, dir, [hook.url, docs.url]);
    const id = `${summary.runId}#1`;
    await until(() => docs.processed().length === 1);
    expect(docs.processed()).toEqual([id]);

    const sent = hook.received[0] as Received;
    const replay = (headers: IncomingHttpHeaders) =>
      fetch(docs.url, { method: 'POST', headers: { 'content-type': 'application/json', ...pick(headers, 'webhook-id', 'webhook-timestamp', 'webhook-signature') }, body: sent.body }).then((res) => res.status);
    // The very request again, within the 5 minutes: answered as delivered, not processed again.
    expect(await replay(sent.headers)).toBe(204);
    // Under another id, or with another time: not ours.
    expect(await replay({ ...sent.headers, 'webhook-id': `${summary.runId}#2` })).toBe(401);
    expect(await replay({ ...sent.headers, 'webhook-timestamp': String(Number(sent.headers['webhook-timestamp']) + 1) })).toBe(401);
    // Signed 6 minutes ago (a request kept and replayed later): refused for its time.
    const hookOptions = { url: docs.url, timeoutMs: 5_000, retry: { attempts: 1, baseDelayMs: 0, maxDelayMs: 0 } };
    const allowed = ['127.0.0.1'];
    const body = sent.body.toString('utf8');
    expect(await deliver({ hook: hookOptions, body, key: KEY, id, allowed, now: () => Date.now() - 6 * 60_000 })).toEqual({ status: 'failed', attempts: 1, error: 'HTTP 401' });
    // At least once: the same end sent again by a later invocation, freshly signed under its id, is dropped.
    expect(await deliver({ hook: hookOptions, body, key: KEY, id, allowed })).toMatchObject({ status: 'delivered' });
    // Another end is processed; the repeats before it were not (the receiver prints in the order it takes requests).
    expect(await deliver({ hook: hookOptions, body, key: KEY, id: `${summary.runId}#9`, allowed })).toMatchObject({ status: 'delivered' });
    await until(() => docs.processed().length === 2);
    expect(docs.processed()).toEqual([id, `${summary.runId}#9`]);
  });
});
