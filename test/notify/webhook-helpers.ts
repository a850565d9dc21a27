import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import type { PipelineDefinition, RunEvent, RunOptions } from '../../src/index.ts';
import { notificationSchema } from '../../src/run/notification.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { ROOT } from '../cli-helpers.ts';
import { until } from '../helpers.ts';
import { runOn } from '../pipeline-helpers.ts';

/** A Standard Webhooks secret: whsec_ and the base64 of 32 bytes. */
export const SECRET = `whsec_${Buffer.from('webdata-etl notifications: tests').toString('base64')}`;
export const KEY = Buffer.from('webdata-etl notifications: tests');
/** A token in the webhook's query string: never shown, never stored. */
export const URL_TOKEN = 'tok_in_query_4c1d7a';

export interface Received {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * A webhook receiver on loopback, a real HTTP server: `answer(n)` says how to answer its n-th request (1-based), a
 * status or `hang` (never answer). On `host`, `127.0.0.1` unless told (any 127.x.y.z is this machine's on Linux: a host
 * of its own for WEBDATA_ALLOWED_HOSTS). Closed, hanging connections and all, at dispose.
 */
export async function receiver(
  answer: (n: number) => number | 'hang' | { status: number; headers: Record<string, string> } = () => 200,
  options: { host?: string } = {},
) {
  const host = options.host ?? '127.0.0.1';
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      const answered = answer(received.length);
      if (answered === 'hang') return;
      const { status, headers } = typeof answered === 'number' ? { status: answered, headers: {} } : answered;
      res.writeHead(status, { 'content-type': 'text/plain', ...headers }).end(status < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/hooks/webdata?token=${URL_TOKEN}`,
    /** The webhook as webdata-etl shows it. */
    shown: `http://${host}:${port}/hooks/webdata`,
    received,
    /** The run ends' notifications received, parsed by their schema. */
    bodies: () => received.map((r) => notificationSchema.parse(JSON.parse(r.body.toString('utf8')))),
    /** Every body received as JSON, whatever its kind (a run's end, missed occurrences). */
    json: () => received.map((r) => JSON.parse(r.body.toString('utf8')) as Record<string, unknown>),
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Whether Standard Webhooks' own npm library takes a delivery as it was received (it throws if not). */
export const libraryVerifies = (received: Received) => new StandardWebhook(SECRET).verify(received.body.toString('utf8'), received.headers as Record<string, string>);

/** A run with webhooks: the secret in its environment, its events kept. */
export async function notifying(sim: Simulator, pipeline: PipelineDefinition, options: RunOptions = {}) {
  const events: RunEvent[] = [];
  // The receivers are on loopback: listed, as a user testing a receiver of theirs would list it.
  const summary = await runOn(sim, pipeline, { env: { WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: '127.0.0.1' }, onEvent: (event) => events.push(event), ...options });
  return { summary, events, notifications: events.filter((event): event is Extract<RunEvent, { type: 'notification' }> => event.type === 'notification') };
}

export const fast = { baseDelayMs: 1, maxDelayMs: 5 };

/** Some of a request's headers, as strings. */
export function pick(headers: IncomingHttpHeaders, ...names: string[]): Record<string, string> {
  return Object.fromEntries(names.map((name) => [name, String(headers[name])]));
}

/**
 * The receiver docs/notifications.md shows ("Checking the signature"), run as it is by node, on a port of its own:
 * `processed()` is the ids it printed as processed, in order. Killed at dispose.
 */
export async function documentedReceiver() {
  const doc = readFileSync(join(ROOT, 'docs/notifications.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Checking the signature')).split('\n## ')[0] ?? '';
  const code = [...section.matchAll(/```js\n([\s\S]*?)\n```/g)].map((match) => match[1] ?? '').find((block) => block.includes('createServer('));
  if (code === undefined) throw new Error('docs/notifications.md, "Checking the signature": no receiver');
  const dir = mkdtempSync(join(tmpdir(), 'webdata-etl-receiver-'));
  writeFileSync(join(dir, 'receiver.mjs'), code);
  const child = spawn(process.execPath, [join(dir, 'receiver.mjs')], { env: { PATH: process.env.PATH, WEBDATA_WEBHOOK_SECRET: SECRET, PORT: '0' }, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await Promise.race([until(() => /listening on \d+\n/.test(stdout)), exited.then(() => Promise.reject(new Error(`the docs' receiver exited: ${stdout}`)))]);
  const port = /listening on (\d+)\n/.exec(stdout)?.[1];
  return {
    url: `http://127.0.0.1:${port}/webdata`,
    processed: () => stdout.split('\n').filter((line) => line !== '' && !line.startsWith('listening on')).map((line) => line.split(' ')[0]),
    async [Symbol.asyncDispose]() {
      child.kill();
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
