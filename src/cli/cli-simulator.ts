import { createHash } from 'node:crypto';
import type { ApiKey } from '../client/api-keys.ts';
import { UsageError } from '../errors/usage-error.ts';
import type { RunOptions } from '../run/run-types.ts';
import { LAST_DAY } from '../simulator/last-day.ts';
import type { Simulator } from '../simulator/server.ts';
import { parseSimulatorKeys, type SimulatorKeyPlan } from './simulator-keys.ts';

/**
 * The simulator `--simulator` starts, for `run` and `worker` alike: one setup, so that the two never differ in what a
 * user trying the tool sees.
 */

/**
 * Rankings drift every this many milliseconds of wall-clock time: runs a few seconds apart see results move, so that
 * change digests and the `changes` view have something to show (docs/client.md#the-simulator).
 */
export const CLI_SIMULATOR_DRIFT_MS = 5_000;

/** The simulator of `--simulator`, and the pool of keys it was given (`--simulator-keys`), if any. */
export type CliSimulator = Simulator & { readonly pool: readonly ApiKey[] | undefined };

/** The variable that gives `--simulator` a pool of keys when `--simulator-keys` does not. */
export const SIMULATOR_KEYS_VARIABLE = 'WEBDATA_SIMULATOR_KEYS';

/**
 * The pool `--simulator` is to start with (docs/cli.md#a-pool-of-keys-offline): `--simulator-keys`, else
 * WEBDATA_SIMULATOR_KEYS (empty: unset), each key's credits `credits` unless the entry says. Checked before anything
 * starts; the flag without `--simulator` is a mistake (the variable is only read with it).
 */
export function simulatorPool(
  values: { simulator?: boolean | undefined; 'simulator-keys'?: string | undefined },
  env: Readonly<Record<string, string | undefined>>,
  credits: number,
): SimulatorKeyPlan[] | undefined {
  const flag = values['simulator-keys'];
  if (flag !== undefined && !values.simulator) throw new UsageError('--simulator-keys gives the built-in simulator its keys: add --simulator (or leave it out)');
  if (!values.simulator) return undefined;
  const [source, text] = flag !== undefined ? ['--simulator-keys', flag] : [SIMULATOR_KEYS_VARIABLE, env[SIMULATOR_KEYS_VARIABLE]];
  if (source === SIMULATOR_KEYS_VARIABLE && (text ?? '').trim() === '') return undefined;
  return parseSimulatorKeys(source, text ?? '', { burst: 5, credits });
}

/** The variable that sets the day `--simulator`'s simulator lives on (docs/client.md#days). */
export const SIMULATOR_DAY_VARIABLE = 'WEBDATA_SIMULATOR_DAY';

/**
 * The built-in simulator's key for `label`: the same in every run, so that what a state database keeps by a key's
 * fingerprint — its allowance and what it spent of it, its remembered limits — carries from one `--simulator` run to
 * the next, as it does with a real key (a random key each run made every run a new key: an allowance of 5 credits a
 * day let each run spend 5). It opens nothing but this loopback simulator.
 */
export function simulatorKey(label: string): string {
  return `sim_${createHash('sha256').update(`webdata-etl built-in simulator\u0000${label}`).digest('hex').slice(0, 32)}`;
}

/**
 * The simulated day `--simulator` is to answer on: WEBDATA_SIMULATOR_DAY (empty: unset, rankings drift as ever), read
 * only with `--simulator`, checked before anything starts.
 */
export function simulatorDay(values: { simulator?: boolean | undefined }, env: Readonly<Record<string, string | undefined>>): number | undefined {
  const text = env[SIMULATOR_DAY_VARIABLE];
  if (!values.simulator || text === undefined || text.trim() === '') return undefined;
  return simulatedDay(SIMULATOR_DAY_VARIABLE, text);
}

/** A simulated day as a flag or variable gives it: a whole number from 0 to LAST_DAY, or a usage error naming `source`. */
export function simulatedDay(source: string, text: string): number {
  const day = /^\d{1,5}$/.test(text.trim()) ? Number(text.trim()) : Number.NaN;
  if (!(day <= LAST_DAY)) throw new UsageError(`${source} must be a simulated day, a whole number from 0 to ${LAST_DAY}; got ${JSON.stringify(text.slice(0, 40))}`);
  return day;
}

/**
 * A simulator on loopback answering 20-80 ms late, drifting (or on one simulated day, `day`): with a key of its own
 * (`name` in its stats, 10 r/s), or with the pool's keys, each under its label with its own rate, burst, credits and
 * revocation.
 */
export async function startCliSimulator(name: string, credits: number, pool?: readonly SimulatorKeyPlan[], day?: number): Promise<CliSimulator> {
  const keys = pool?.map((plan) => ({ label: plan.label, key: simulatorKey(plan.label) }));
  // Loaded when asked for: a run against the real API does not load the simulator's modules as it starts.
  const { startSimulator } = await import('../simulator/server.ts');
  const sim = await startSimulator({
    latencyMs: { min: 20, max: 80 },
    driftEveryMs: CLI_SIMULATOR_DRIFT_MS,
    day,
    keys:
      pool && keys
        ? pool.map((plan, index) => ({ key: keys[index]?.key, name: plan.label, ratePerSecond: plan.ratePerSecond, burst: plan.burst, credits: plan.credits, revokeAfter: plan.revokeAfter ?? null }))
        : [{ key: simulatorKey('default'), name, ratePerSecond: 10, burst: 5, credits }],
  });
  return Object.assign(sim, { pool: keys });
}

/**
 * What a run is given to work against the simulator: its address and key, and the environment with the simulator's
 * host added to WEBDATA_ALLOWED_HOSTS. The simulator's own key goes to the simulator: the allow-list of the real key's
 * hosts admits it, and still holds for everything else the run sends to (its webhooks). With a pool, the run's
 * environment holds the simulator's keys as WEBDATA_API_KEYS, in place of every credential of the real environment:
 * a real key is never sent to the simulator, nor a simulator's key anywhere else.
 */
export function simulatorTarget(sim: CliSimulator, env: NodeJS.ProcessEnv): Pick<RunOptions, 'baseUrl' | 'apiKey' | 'sources' | 'env'> {
  const sources = { baseUrl: '--simulator', credentials: 'the built-in simulator' };
  if (!sim.pool) return { baseUrl: sim.url, apiKey: sim.apiKey, sources, env: withSimulatorAllowed(env, sim.url) };
  const { WEBDATA_API_KEY: _key, WEBDATA_API_KEYS_FILE: _file, WEBDATA_TOKEN: _token, ...others } = env;
  const pooled = { ...others, WEBDATA_API_KEYS: sim.pool.map(({ label, key }) => `${label}=${key}`).join(',') };
  return { baseUrl: sim.url, sources, env: withSimulatorAllowed(pooled, sim.url) };
}

/** WEBDATA_ALLOWED_HOSTS with the simulator's host added, when it is set (unset, any host is allowed). */
function withSimulatorAllowed(env: Readonly<Record<string, string | undefined>>, simulatorUrl: string): Record<string, string | undefined> {
  const list = env.WEBDATA_ALLOWED_HOSTS;
  if (list === undefined || list.trim() === '') return { ...env };
  return { ...env, WEBDATA_ALLOWED_HOSTS: `${list},${new URL(simulatorUrl).hostname}` };
}
