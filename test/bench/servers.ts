// The two kinds of rate-limited server a scenario can run against, behind one shape, so that each scenario is
// written once and the limiter is the only thing that changes.
import { randomBytes } from 'node:crypto';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../src/simulator/index.ts';
import { startNginx } from './nginx.ts';

export type ServerKind = 'simulator' | 'nginx';

export interface Target {
  kind: ServerKind;
  /** `{base_url}` the client talks to. */
  url: string;
  apiKey: string;
  /** The simulator behind it (the limiter itself, or the upstream of nginx): it counts credits debited. */
  sim: Simulator;
  /** What the limiter itself says it answered, by status (its own count, not the scheduler's). */
  serverStatuses(): Promise<Record<string, number>>;
  limiter: { algorithm: string; ratePerSecond: number | null; burst: number | null; retryAfter: string };
  close(): Promise<void>;
}

export interface LimitedOptions {
  ratePerSecond: number;
  burst: number;
  latencyMs: number;
  /** Simulator only (nginx sends none): whether 429s carry Retry-After. */
  retryAfter: 'seconds' | 'none';
}

/** A fresh key per run, so that nothing in a report could be mistaken for a real credential. */
const benchKey = () => `bench_${randomBytes(12).toString('hex')}`;

export async function limitedTarget(kind: ServerKind, options: LimitedOptions): Promise<Target> {
  const apiKey = benchKey();
  if (kind === 'simulator') {
    const sim = await startSimulator({
      latencyMs: options.latencyMs,
      retryAfter: options.retryAfter,
      keys: [{ key: apiKey, name: 'main', ratePerSecond: options.ratePerSecond, burst: options.burst }],
    });
    return simulatorTarget(sim, apiKey, {
      algorithm: 'simulator token bucket',
      ratePerSecond: options.ratePerSecond,
      burst: options.burst,
      retryAfter: options.retryAfter === 'none' ? 'none' : 'seconds (rounded up, at least 1)',
    });
  }
  const sim = await startSimulator({ latencyMs: options.latencyMs, keys: [{ key: apiKey, name: 'main' }] });
  try {
    const nginx = await startNginx({ upstreamPort: sim.port, ratePerSecond: options.ratePerSecond, burst: options.burst });
    return {
      kind,
      url: nginx.url,
      apiKey,
      sim,
      serverStatuses: () => nginx.statusCounts(),
      limiter: { algorithm: 'nginx limit_req (leaky bucket, nodelay)', ratePerSecond: options.ratePerSecond, burst: options.burst, retryAfter: 'none' },
      close: async () => {
        await nginx.close();
        await sim.close();
      },
    };
  } catch (error) {
    await sim.close();
    throw error;
  }
}

/**
 * A key whose plan counts requests per fixed window (the simulator's quota): a 429 past the window's count, with
 * Retry-After to its end (whole seconds, rounded up); with `headers`, every answer says what is left of the window.
 */
export async function fixedWindowTarget(options: { quota: { requests: number; windowMs: number }; headers: 'ietf' | 'none'; latencyMs: number }): Promise<Target> {
  const apiKey = benchKey();
  const sim = await startSimulator({ latencyMs: options.latencyMs, rateLimitHeaders: options.headers, retryAfter: 'seconds', keys: [{ key: apiKey, name: 'main', quota: options.quota }] });
  return simulatorTarget(sim, apiKey, {
    algorithm: `simulator fixed window, ${options.quota.requests} per ${options.quota.windowMs / 1000} s${options.headers === 'none' ? '' : ', RateLimit headers'}`,
    ratePerSecond: null,
    burst: null,
    retryAfter: 'seconds (rounded up, at least 1)',
  });
}

/** An unlimited key: for scenarios about faults and budgets, where the rate limit would only blur the figures. */
export async function unlimitedTarget(options: Pick<SimulatorOptions, 'latencyMs' | 'faults' | 'seed' | 'resultsPerQuery' | 'logLimit'>): Promise<Target> {
  const apiKey = benchKey();
  const sim = await startSimulator({ ...options, keys: [{ key: apiKey, name: 'main' }] });
  return simulatorTarget(sim, apiKey, { algorithm: 'none', ratePerSecond: null, burst: null, retryAfter: 'n/a' });
}

/** The simulator itself as the target: its own counts by status, closed with it. */
function simulatorTarget(sim: Simulator, apiKey: string, limiter: Target['limiter']): Target {
  return { kind: 'simulator', url: sim.url, apiKey, sim, serverStatuses: async () => sim.stats().byStatus, limiter, close: () => sim.close() };
}
