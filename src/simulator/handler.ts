import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Endpoint, ENDPOINTS } from './endpoints.ts';
import { applyFault, type Exchange } from './fault-effects.ts';
import type { Fault, FaultBook, RequestFacts } from './faults.ts';
import type { KeyRing } from './key-ring.ts';
import type { ResolvedSimulatorOptions } from './options.ts';
import type { ParkingLot } from './parking.ts';
import type { KeyAccount } from './plans.ts';
import { rateLimitHeaders, refusalBody, retryAfterHeader, send } from './replies.ts';
import { generator, hash } from './rng.ts';
import type { Traffic } from './traffic.ts';
import type { LogEntry } from './types.ts';

export const PREFIX = '/api/v1';
const MAX_REQUEST_BODY = 1024 * 1024;

/** What the simulated API answers from: the settings, the clocks, and the simulator's parts it shares with `startSimulator`. */
export interface SimulatedApiParts {
  settings: ResolvedSimulatorOptions;
  clock: () => number;
  epoch: () => number;
  /** The simulated day now (`Simulator.setDay` changes it), or undefined: no days. */
  day: () => number | undefined;
  keys: KeyRing;
  faults: FaultBook;
  traffic: Traffic;
  parking: ParkingLot;
}

/**
 * The simulated API's answer to one request, as the contract says and the faults change it: the route, the body,
 * the credentials, the gates of `park`, a scripted fault, the key's plan (admission), the endpoint, latency, a
 * random fault, then the answer; every request counted and logged.
 */
export class SimulatedApi {
  readonly #settings: ResolvedSimulatorOptions;
  readonly #clock: () => number;
  readonly #epoch: () => number;
  readonly #day: () => number | undefined;
  readonly #keys: KeyRing;
  readonly #faults: FaultBook;
  readonly #traffic: Traffic;
  readonly #parking: ParkingLot;
  // Latencies drawn from the seed, like everything else the simulator decides.
  readonly #latencyRandom: () => number;
  /** Responses a fault keeps open (a hang, a stalled or oversize body), to end when the simulator closes. */
  readonly #heldOpen = new Set<ServerResponse>();

  constructor({ settings, clock, epoch, day, keys, faults, traffic, parking }: SimulatedApiParts) {
    this.#settings = settings;
    this.#clock = clock;
    this.#epoch = epoch;
    this.#day = day;
    this.#keys = keys;
    this.#faults = faults;
    this.#traffic = traffic;
    this.#parking = parking;
    this.#latencyRandom = generator(hash(settings.seed, 'latency'));
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const at = this.#clock();
    res.setHeader('x-request-id', this.#traffic.arrive());
    const url = new URL(req.url ?? '/', 'http://simulator');
    const path = url.pathname.startsWith(`${PREFIX}/`) ? url.pathname.slice(PREFIX.length) : url.pathname;
    const method = req.method ?? 'GET';
    const entry: LogEntry = { at, method, path, query: url.search, key: '', status: 0, charged: 0, fault: undefined };
    const reply = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      entry.status = status;
      send(res, status, body, headers);
    };
    try {
      await this.#route({ req, res, url, path, entry, reply });
    } finally {
      this.#traffic.end(entry);
    }
  }

  /** Lets every parked request go on and ends the responses faults keep open: the simulator is closing. */
  letGo(): void {
    this.#parking.releaseAll();
    for (const res of this.#heldOpen) res.destroy();
  }

  /** Everything before the key's plan is asked: the route, the body, the credentials, the gates, a scripted fault. */
  async #route(exchange: Exchange): Promise<void> {
    const { req, url, path, entry, reply } = exchange;
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

    const account = this.#keys.authenticate(req.headers);
    if (!account) {
      const missing = req.headers['x-api-key'] === undefined && req.headers.authorization === undefined;
      return reply(401, { error: { code: 'unauthorized', message: missing ? 'API key missing' : 'API key invalid' } });
    }
    entry.key = account.plan.name;
    const facts = requestFacts(entry.method, path, url, body, entry.key);
    for (const gate of this.#parking.matching(facts)) await gate.hold();

    const scripted = this.#faults.scripted(facts);
    if (scripted && scripted.fault !== 'delay') {
      entry.fault = scripted.fault;
      // A scripted fault stands in for the whole exchange; only the charged variants debit.
      await applyFault(scripted, exchange, account, this.#settings.weights[path] ?? 1, this.#heldOpen);
      return;
    }
    await this.#serve(exchange, endpoint, body, account, scripted);
  }

  /** The key's plan admits the request (or refuses it), the endpoint answers, after latency or a random fault. */
  async #serve(exchange: Exchange, endpoint: Endpoint, body: unknown, account: KeyAccount, delayFault: Fault | undefined): Promise<void> {
    const { res, url, path, entry, reply } = exchange;
    const settings = this.#settings;
    const weight = settings.weights[path] ?? 1;
    const refusal = account.admit(path, weight, this.#clock());
    for (const [name, value] of Object.entries(rateLimitHeaders(settings, account, this.#clock, this.#epoch))) res.setHeader(name, value);
    if (refusal) return reply(refusal.status, refusalBody(refusal), retryAfterHeader(settings, refusal, this.#epoch));

    let charged = false;
    try {
      const outcome = endpoint.handle({ query: url.searchParams, body, options: settings, day: this.#day() });
      if (!outcome.ok) return reply(outcome.status, outcome.body);

      const delay = (delayFault?.fault === 'delay' ? delayFault.ms : 0) + this.#latency();
      if (delay > 0) await sleep(delay);

      const random = this.#faults.random();
      if (random) {
        entry.fault = random.fault;
        charged = await applyFault(random, exchange, account, weight, this.#heldOpen, true);
        return;
      }
      charged = true;
      entry.charged = weight;
      reply(200, outcome.body);
    } finally {
      account.settle(weight, charged);
    }
  }

  #latency(): number {
    const latency = this.#settings.latencyMs;
    if (typeof latency === 'number') return latency;
    return latency.min + this.#latencyRandom() * Math.max(0, latency.max - latency.min);
  }
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
