import type { LookupAddress } from 'node:dns';
import { createServer, type LookupFunction, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { normalize, searchPages, toCsv, ValidationError } from '../../src/index.ts';
import { deliver } from '../../src/notify/deliver.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';
import { KEY, SECRET } from './webhook-helpers.ts';

/**
 * A TCP server on loopback that counts the connections made to it and closes each at once: whether a delivery got as
 * far as connecting, whatever it would have said. Closed at dispose.
 */
async function listener() {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    connections: () => connections,
    async [Symbol.asyncDispose]() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A resolver that answers `addresses` for `name` (and nothing else): what a DNS server of the file's choosing could say. */
function resolving(name: string, addresses: string[]): LookupFunction {
  const answer: LookupAddress[] = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  return ((hostname: string, options: { all?: boolean }, callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void) => {
    if (hostname !== name) return callback(Object.assign(new Error(`no such name: ${hostname}`), { code: 'ENOTFOUND' }), []);
    if (options.all) callback(null, answer);
    else callback(null, answer[0]?.address ?? '', answer[0]?.family);
  }) as LookupFunction;
}

describe('webhooks to private, loopback and link-local addresses', () => {
  it('literal addresses (IPv4, IPv6, IPv4-mapped, NAT64, a decimal IPv4, localhost) are refused before any request, exit 2, unless WEBDATA_ALLOWED_HOSTS lists them; the simulator and the listener see nothing', async () => {
    await using sim = await simulator();
    await using local = await listener();
    using dir = workdir();
    const urls = {
      'https://169.254.169.254/latest/meta-data/?q=x': 'https://169.254.169.254 is a link-local address',
      'https://10.0.0.1/hook': 'https://10.0.0.1 is a private (RFC 1918) address',
      'https://[fd00::1]/hook': 'https://[fd00::1] is a unique-local (fc00::/7) address',
      'https://[::ffff:10.0.0.1]/hook': 'https://[::ffff:a00:1] is a private (RFC 1918) address',
      'https://[64:ff9b::a9fe:a9fe]/hook': 'https://[64:ff9b::a9fe:a9fe] is a link-local address',
      'https://100.64.0.1/hook': 'https://100.64.0.1 is a shared (carrier-grade NAT, 100.64.0.0/10) address',
      'https://0.0.0.0/hook': 'https://0.0.0.0 is an unspecified address',
      'https://[::]/hook': 'https://[::] is an unspecified address',
      'https://[fe80::1]/hook': 'https://[fe80::1] is a link-local address',
      'https://2130706433/hook': 'https://127.0.0.1 is a loopback address',
      'https://localhost/hook': 'https://localhost is a loopback address',
      [`http://127.0.0.1:${local.port}/hook`]: `http://127.0.0.1:${local.port} is a loopback address`,
    };
    const base = { name: 'private', source: searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }), stages: [normalize()], sinks: [toCsv({ path: dir.path('r.csv') })] };
    // Two pipelines: at most 10 webhooks each.
    for (const part of [Object.entries(urls).slice(0, 6), Object.entries(urls).slice(6)]) {
      const webhooks = part.map(([url]) => ({ url }));
      const error = await runOn(sim, { ...base, notify: { webhooks } }, { env: { WEBDATA_WEBHOOK_SECRET: SECRET } }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).issues).toEqual(part.map(([, message], index) => ({ path: `notify.webhooks.${index}.url`, message: expect.stringContaining(message) })));
      expect((error as ValidationError).issues[0]?.message).toContain('unless WEBDATA_ALLOWED_HOSTS lists the host');

      const file = config(dir.dir, { notify: { webhooks } }, { queries: ['a'], countries: ['us'], maxPages: 1 });
      const refused = await cli(['run', file], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_WEBHOOK_SECRET: SECRET } });
      expect(refused.code).toBe(2);
      for (const [index, [, message]] of part.entries()) expect(refused.stderr).toContain(`notify.webhooks.${index}.url: ${message}`);
      expect(refused.stderr).not.toContain('q=x');
    }
    expect(sim.stats().requests).toBe(0);
    expect(local.connections()).toBe(0);

    // Listed, an address is taken (and a run on the simulator with the listener as its webhook delivers to it).
    const listed = await runOn(sim, { ...base, notify: { webhooks: [{ url: `http://127.0.0.1:${local.port}/hook`, retry: { attempts: 1 } }] } }, { env: { WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: '127.0.0.1' } });
    expect(listed.status).toBe('completed');
    expect(local.connections()).toBe(1);
  });

  it('a name that resolves to a private or loopback address is refused as the delivery connects, every address checked: no connection, not tried again; listed, it is connected to', async () => {
    await using local = await listener();
    const hook = { url: `https://hooks.test:${local.port}/hook?token=t`, timeoutMs: 2_000, retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 5 } };
    const send = (lookup: LookupFunction, allowed?: string[]) => deliver({ hook, body: '{"a":1}', key: KEY, id: 'run#1', lookup, allowed });

    // The name is no address of its own: nothing before the run could tell. At connect time, its address is refused.
    const loopback = await send(resolving('hooks.test', ['127.0.0.1']));
    expect(loopback).toEqual({ status: 'failed', attempts: 1, error: 'refused: hooks.test resolves to 127.0.0.1, a loopback address; a webhook is sent to such an address only when WEBDATA_ALLOWED_HOSTS lists its host' });
    // A public address beside a private one: refused whole (whichever the connection would have tried first).
    const mixed = await send(resolving('hooks.test', ['93.184.215.14', '10.1.2.3']));
    expect(mixed).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringContaining('hooks.test resolves to 10.1.2.3, a private (RFC 1918) address') });
    const mapped = await send(resolving('hooks.test', ['::ffff:169.254.169.254']));
    expect(mapped).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringContaining('a link-local address') });
    expect(local.connections()).toBe(0);

    // Listed, by name or by address, it is connected to (the listener closes it: a network error, tried again).
    expect(await send(resolving('hooks.test', ['127.0.0.1']), ['hooks.test'])).toMatchObject({ status: 'failed', attempts: 3, error: expect.stringMatching(/^network error/) });
    expect(local.connections()).toBe(3);
    expect(await send(resolving('hooks.test', ['127.0.0.1']), ['api.example.com', '127.0.0.1'])).toMatchObject({ status: 'failed', attempts: 3 });
    expect(local.connections()).toBe(6);
  });

  it('through a proxy (HTTPS_PROXY), the proxy is connected to, whatever its address, and resolves the name itself', async () => {
    await using proxy = await listener();
    const saved = { ...process.env };
    for (const name of ['https_proxy', 'NO_PROXY', 'no_proxy']) delete process.env[name];
    process.env.HTTPS_PROXY = `http://127.0.0.1:${proxy.port}`;
    try {
      const hook = { url: 'https://hooks.test/hook', timeoutMs: 2_000, retry: { attempts: 1, baseDelayMs: 1, maxDelayMs: 5 } };
      // The resolver is never asked: the name goes to the proxy in its CONNECT.
      const outcome = await deliver({ hook, body: '{"a":1}', key: KEY, id: 'run#1', lookup: resolving('elsewhere.test', []) });
      expect(outcome).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringMatching(/^network error/) });
      expect(proxy.connections()).toBe(1);
    } finally {
      for (const name of ['HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy']) {
        if (saved[name] === undefined) delete process.env[name];
        else process.env[name] = saved[name];
      }
    }
  });
});
