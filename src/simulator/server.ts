import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Endpoint, ENDPOINTS } from './endpoints.ts';
import { type Fault, faultBook, matches, type RequestFacts } from './faults.ts';
import { type FaultRule, keySchema, resolveSimulatorOptions, type SimulatorOptions } from './options.ts';
import { KeyAccount } from './plans.ts';
import { defaultBody, rateLimitHeaders, refusalBody, retryAfterHeader, send, sendMalformed, streamOversize } from './replies.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { generator, hash } from './rng.ts';
import type { Gate, LogEntry, Simulator, SimulatorStats } from './types.ts';

const PREFIX = '/api/v1';
const MAX_REQUEST_BODY = 1024 * 1024;

export type { Gate, LogEntry, Simulator, SimulatorStats } from './types.ts';

/** Starts the contract-faithful simulator on loopback. Resolves once it listens (milliseconds). */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const settings = resolveSimulatorOptions(options);
  const clock = settings.clock ?? (() => performance.now());
  const epoch = settings.epoch ?? (() => Date.now());
  // Latencies drawn from the seed, like everything else the simulator decides.
  const latencyRandom = generator(hash(settings.seed, 'latency'));
  const keys = settings.keys ?? [keySchema.parse({ key: `sim_${randomBytes(12).toString('hex')}`, name: 'default' })];
  const accounts = new Map<string, KeyAccount>();
  const byKey = new Map<string, KeyAccount>();
  const byToken = new Map<string, KeyAccount>();
  for (const plan of keys) {
    const account = new KeyAccount(plan, clock());
    accounts.set(plan.name, account);
    if (plan.key !== undefined) byKey.set(plan.key, account);
    if (plan.token !== undefined) byToken.set(plan.token, account);
  }
  const faults = faultBook(settings);
  const open = new Set<ServerResponse>();
  const gates = new Set<GateState>();
  let requestCounter = 0;
  let stats = emptyStats();
  let entries: LogEntry[] = [];

  function record(entry: LogEntry): void {
    stats.requests += 1;
    const status = String(entry.status);
    stats.byStatus[status] = (stats.byStatus[status] ?? 0) + 1;
    stats.byPath[entry.path] = (stats.byPath[entry.path] ?? 0) + 1;
    if (entry.fault) stats.faults[entry.fault] = (stats.faults[entry.fault] ?? 0) + 1;
    if (settings.logLimit > 0) {
      entries.push(entry);
      if (entries.length > settings.logLimit) entries = entries.slice(-settings.logLimit);
    }
  }

  function authenticate(req: IncomingMessage): KeyAccount | undefined {
    const key = req.headers['x-api-key'];
    if (typeof key === 'string' && key !== '') return byKey.get(key);
    const auth = req.headers.authorization;
    const match = typeof auth === 'string' ? /^Bearer\s+(.+)$/i.exec(auth) : null;
    return match?.[1] ? byToken.get(match[1]) : undefined;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const at = clock();
    requestCounter += 1;
    res.setHeader('x-request-id', `sim-${requestCounter}`);
    stats.inFlight += 1;
    stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight);
    const url = new URL(req.url ?? '/', 'http://simulator');
    const path = url.pathname.startsWith(`${PREFIX}/`) ? url.pathname.slice(PREFIX.length) : url.pathname;
    const method = req.method ?? 'GET';
    const entry: LogEntry = { at, method, path, query: url.search, key: '', status: 0, charged: 0, fault: undefined };
    try {
      await route(req, res, url, path, entry);
    } finally {
      stats.inFlight -= 1;
      record(entry);
    }
  }

  async function route(req: IncomingMessage, res: ServerResponse, url: URL, path: string, entry: LogEntry): Promise<void> {
    const reply = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      entry.status = status;
      send(res, status, body, headers);
    };
    const endpoint: Endpoint | undefined = url.pathname.startsWith(`${PREFIX}/`) ? ENDPOINTS[path] : undefined;
    if (!endpoint) return reply(404, { error: { code: 'not_found', message: `no endpoint at ${url.pathname}` } });
    if (entry.method !== endpoint.method) {
      return reply(405, { error: { code: 'method_not_allowed', message: `use ${endpoint.method}` } }, { allow: endpoint.method });
    }
    let body: unknown;
    if (endpoint.method === 'POST') {
      const parsed = await readJson(req);
      if (!parsed.ok) return reply(400, { errors: [{ field: 'body', message: parsed.message }] });
      body = parsed.value;
    } else {
      req.resume();
    }

    const account = authenticate(req);
    if (!account) {
      const missing = req.headers['x-api-key'] === undefined && req.headers.authorization === undefined;
      return reply(401, { error: { code: 'unauthorized', message: missing ? 'API key missing' : 'API key invalid' } });
    }
    entry.key = account.plan.name;
    const facts = requestFacts(entry.method, path, url, body, entry.key);
    for (const gate of gates) if (matches(gate.match, facts)) await gate.pass();

    const scripted = faults.scripted(facts);
    if (scripted && scripted.fault !== 'delay') {
      entry.fault = scripted.fault;
      // A scripted fault stands in for the whole exchange; only the charged variants debit.
      await applyFault(scripted, res, entry, account, settings.weights[path] ?? 1, reply, url);
      return;
    }

    const weight = settings.weights[path] ?? 1;
    const refusal = account.admit(path, weight, clock());
    for (const [name, value] of Object.entries(rateLimitHeaders(settings, account, clock, epoch))) res.setHeader(name, value);
    if (refusal) return reply(refusal.status, refusalBody(refusal), retryAfterHeader(settings, refusal, epoch));

    let charged = false;
    try {
      const outcome = endpoint.handle({ query: url.searchParams, body, options: settings });
      if (!outcome.ok) return reply(outcome.status, outcome.body);

      const delay = (scripted?.fault === 'delay' ? scripted.ms : 0) + latency();
      if (delay > 0) await sleep(delay);

      const random = faults.random();
      if (random) {
        entry.fault = random.fault;
        charged = await applyFault(random, res, entry, account, weight, reply, url, true);
        return;
      }
      charged = true;
      entry.charged = weight;
      reply(200, outcome.body);
    } finally {
      account.settle(weight, charged);
    }
  }

  /**
   * Carries out a fault. `admitted` says whether the account already holds a reservation (random faults come
   * after admission; scripted ones replace it). Resolves to whether the request was charged.
   */
  async function applyFault(
    fault: Fault,
    res: ServerResponse,
    entry: LogEntry,
    account: KeyAccount,
    weight: number,
    reply: (status: number, body: unknown, headers?: Record<string, string>) => void,
    url: URL,
    admitted = false,
  ): Promise<boolean> {
    const debit = () => {
      entry.charged = weight;
      // A reservation is settled by the caller; a scripted fault debits directly.
      if (!admitted) account.debited += weight;
      return true;
    };
    switch (fault.fault) {
      case 'status': {
        const charged = fault.status >= 200 && fault.status < 300;
        reply(fault.status, fault.body ?? defaultBody(fault.status), fault.headers);
        return charged && debit();
      }
      case 'redirect':
        reply(fault.status, '', { location: fault.location ?? `https://moved.example${url.pathname}${url.search}` });
        return false;
      case 'malformed':
        entry.status = 200;
        sendMalformed(res, fault.form);
        return debit();
      case 'reset': {
        const charged = fault.charged && debit();
        res.socket?.destroy();
        return charged;
      }
      case 'hang':
      case 'stall-body': {
        const charged = (fault.fault === 'stall-body' || fault.charged) && debit();
        if (fault.fault === 'stall-body') {
          entry.status = 200;
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': '100000' });
          res.write('{"data":[{"title":"partial');
        }
        open.add(res);
        await new Promise<void>((resolve) => res.once('close', resolve));
        open.delete(res);
        return charged;
      }
      case 'oversize':
        entry.status = 200;
        debit();
        open.add(res);
        await streamOversize(res, fault.bytes, fault.declareLength);
        open.delete(res);
        return true;
      case 'delay':
        return false;
    }
  }

  function latency(): number {
    const l = settings.latencyMs;
    if (typeof l === 'number') return l;
    return l.min + latencyRandom() * Math.max(0, l.max - l.min);
  }

  const server = createServer({ keepAlive: true }, (req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, { error: { code: 'internal', message: String(error) } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, settings.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;

  const close = async () => {
    for (const gate of gates) gate.public.release();
    for (const res of open) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };

  return {
    url: `http://${host}:${port}${PREFIX}`,
    port,
    apiKey: keys[0]?.key,
    stats: () => ({
      ...stats,
      byStatus: { ...stats.byStatus },
      byPath: { ...stats.byPath },
      faults: { ...stats.faults },
      credits: Object.fromEntries([...accounts].map(([name, a]) => [name, { debited: a.debited, remaining: a.remaining }])),
    }),
    log: () => entries.slice(),
    resetStats() {
      stats = { ...emptyStats(), inFlight: stats.inFlight };
      entries = [];
    },
    inject: (rule) => faults.add(rule),
    clearRules: () => faults.clear(),
    park(match = {}) {
      const gate = createGate(match, () => gates.delete(gate));
      gates.add(gate);
      return gate.public;
    },
    updateKey(name, patch) {
      const account = accounts.get(name);
      if (!account) throw new ValidationError('Invalid key update', [{ path: 'name', message: `no simulated key named "${name}"` }]);
      account.update(patch, clock());
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

type Match = NonNullable<FaultRule['match']>;

interface GateState {
  match: Match;
  pass(): Promise<void>;
  public: Gate;
}

function createGate(match: Match, done: () => void): GateState {
  let released = false;
  let waiting = 0;
  let arrived = 0;
  const held: (() => void)[] = [];
  const watchers: { count: number; wake: () => void }[] = [];
  const notify = () => {
    for (const watcher of watchers.filter((w) => arrived >= w.count)) {
      watchers.splice(watchers.indexOf(watcher), 1);
      watcher.wake();
    }
  };
  return {
    match,
    pass() {
      if (released) return Promise.resolve();
      arrived += 1;
      waiting += 1;
      notify();
      return new Promise<void>((resolve) =>
        held.push(() => {
          waiting -= 1;
          resolve();
        }),
      );
    },
    public: {
      get waiting() {
        return waiting;
      },
      get arrived() {
        return arrived;
      },
      reached(count = 1) {
        return arrived >= count ? Promise.resolve() : new Promise<void>((wake) => watchers.push({ count, wake }));
      },
      release() {
        if (released) return;
        released = true;
        done();
        for (const go of held.splice(0)) go();
      },
    },
  };
}

function emptyStats(): Omit<SimulatorStats, 'credits'> {
  return { requests: 0, byStatus: {}, byPath: {}, faults: {}, inFlight: 0, maxInFlight: 0 };
}

function requestFacts(method: string, path: string, url: URL, body: unknown, key: string): RequestFacts {
  const params = url.searchParams;
  const fromBody = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const q = params.get('q') ?? (typeof fromBody.query === 'string' ? fromBody.query : undefined);
  const page = params.get('page') ?? (typeof fromBody.page === 'number' ? String(fromBody.page) : undefined);
  return {
    method,
    path,
    key,
    q: q ?? undefined,
    page: page === undefined ? 1 : Number(page),
    country: params.get('country') ?? undefined,
    lang: params.get('lang') ?? undefined,
  };
}

async function readJson(req: IncomingMessage): Promise<{ ok: true; value: unknown } | { ok: false; message: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_REQUEST_BODY) return { ok: false, message: 'body too large' };
    chunks.push(chunk);
  }
  if (size === 0) return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { ok: false, message: 'body is not valid JSON' };
  }
}
