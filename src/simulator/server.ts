import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Endpoint, ENDPOINTS } from './endpoints.ts';
import { type Fault, faultBook, matches, type RequestFacts } from './faults.ts';
import { type FaultRule, keySchema, type ResolvedKey, resolveSimulatorOptions, type SimulatorOptions } from './options.ts';
import { KeyAccount, type Refusal } from './plans.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { generator, hash } from './rng.ts';

const PREFIX = '/api/v1';
const MAX_REQUEST_BODY = 1024 * 1024;

export interface LogEntry {
  /** Milliseconds on the simulator's clock when the request arrived. */
  at: number;
  method: string;
  path: string;
  query: string;
  /** Key name, or '' when the request carried no valid credentials. */
  key: string;
  /** Status sent, or 0 when the connection was reset or left hanging. */
  status: number;
  charged: number;
  fault: string | undefined;
}

export interface SimulatorStats {
  requests: number;
  byStatus: Record<string, number>;
  byPath: Record<string, number>;
  /** Credits debited and remaining (`null`: unlimited), by key name. */
  credits: Record<string, { debited: number; remaining: number | null }>;
  faults: Record<string, number>;
  inFlight: number;
  maxInFlight: number;
}

/** Requests held by `Simulator.park` until `release`. */
export interface Gate {
  /** Requests held now. */
  readonly waiting: number;
  /** Requests held so far, released or not. */
  readonly arrived: number;
  /** Resolves once `count` requests have arrived at the gate. */
  reached(count?: number): Promise<void>;
  /** Lets the held requests (and every later one) go on. */
  release(): void;
}

export interface Simulator {
  /** `{base_url}`: `http://127.0.0.1:<port>/api/v1`. */
  readonly url: string;
  readonly port: number;
  /** The key of the first configured key (the generated one when none was configured). */
  readonly apiKey: string | undefined;
  stats(): SimulatorStats;
  log(): readonly LogEntry[];
  resetStats(): void;
  /** Adds a scripted fault rule at run time. */
  inject(rule: FaultRule): void;
  clearRules(): void;
  /** Changes a key's plan mid-run: credits, status, rate, endpoints, quota. */
  updateKey(name: string, patch: Partial<ResolvedKey>): void;
  /**
   * Holds every request that matches (all, by default) unanswered until the gate is released, so that a test can keep
   * a run in flight for exactly as long as it needs, whatever the machine's speed. Held requests are not yet admitted:
   * they take no rate allowance and no credit until they go on.
   */
  park(match?: FaultRule['match']): Gate;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

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
    for (const [name, value] of Object.entries(rateLimitHeaders(account))) res.setHeader(name, value);
    if (refusal) return reply(refusal.status, refusalBody(refusal), retryAfterHeader(refusal));

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

  function rateLimitHeaders(account: KeyAccount): Record<string, string> {
    const allowance = settings.rateLimitHeaders === 'none' ? undefined : account.allowance(clock());
    if (!allowance) return {};
    const { limit, remaining } = allowance;
    const reset = Math.max(0, Math.ceil(allowance.resetMs / 1000));
    const window = Math.ceil(allowance.windowMs / 1000);
    switch (settings.rateLimitHeaders) {
      case 'ietf':
        return { ratelimit: `"default";r=${remaining};t=${reset}`, 'ratelimit-policy': `"default";q=${limit};w=${window}` };
      case 'ietf-legacy':
        return { 'ratelimit-limit': String(limit), 'ratelimit-remaining': String(remaining), 'ratelimit-reset': String(reset), 'ratelimit-policy': `${limit};w=${window}` };
      default:
        return { 'x-ratelimit-limit': String(limit), 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(Math.ceil(epoch() / 1000) + reset) };
    }
  }

  function retryAfterHeader(refusal: Refusal): Record<string, string> {
    if (refusal.status !== 429 || settings.retryAfter === 'none') return {};
    const seconds = Math.max(1, Math.ceil(refusal.retryAfterMs / 1000));
    if (settings.retryAfter === 'seconds') return { 'retry-after': String(seconds) };
    return { 'retry-after': new Date(epoch() + (seconds + 1) * 1000).toUTCString() };
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

function refusalBody(refusal: Refusal): Record<string, unknown> {
  const messages: Record<Refusal['reason'], string> = {
    revoked: 'API key revoked',
    suspended: 'account suspended: billing problem',
    endpoint: 'endpoint not included in your plan',
    rate: 'rate limit exceeded',
    concurrency: 'too many concurrent requests',
    quota: 'quota exhausted for this period',
    credits: 'insufficient credits',
  };
  return { error: { code: refusal.reason, message: messages[refusal.reason] } };
}

function defaultBody(status: number): Record<string, unknown> {
  return { error: { code: `status_${status}`, message: status >= 500 ? 'upstream failure' : `status ${status}` } };
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': typeof body === 'string' && status !== 200 ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

function sendMalformed(res: ServerResponse, form: 'truncated' | 'not-json' | 'no-data' | 'html'): void {
  const bodies = {
    truncated: '{"data":[{"title":"cut off in the mid',
    'not-json': 'data: none',
    'no-data': '{"results":[]}',
    html: '<html><body>Service temporarily degraded</body></html>',
  };
  const type = form === 'html' ? 'text/html' : 'application/json; charset=utf-8';
  res.writeHead(200, { 'content-type': type, 'content-length': String(Buffer.byteLength(bodies[form])) });
  res.end(bodies[form]);
}

/** A body of `bytes` bytes that starts like a search page, written chunk by chunk as the client takes them. */
async function streamOversize(res: ServerResponse, bytes: number, declareLength: boolean): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', ...(declareLength ? { 'content-length': String(bytes) } : {}) });
  const head = Buffer.from('{"data":[{"title":"');
  const filler = Buffer.alloc(64 * 1024, 'x');
  const closed = new Promise<void>((resolve) => res.once('close', resolve));
  let left = bytes;
  for (let chunk = head; left > 0 && !res.destroyed; chunk = filler) {
    const part = chunk.subarray(0, Math.min(chunk.length, left));
    left -= part.length;
    // Backpressure: wait for the client to read (or leave) rather than queue the whole body in memory.
    if (!res.write(part)) await Promise.race([new Promise((resolve) => res.once('drain', resolve)), closed]);
  }
  if (!res.destroyed) res.end();
  await closed;
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
