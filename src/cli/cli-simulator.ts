import type { RunOptions } from '../run/run-types.ts';
import { type Simulator, startSimulator } from '../simulator/server.ts';

/**
 * The simulator `--simulator` starts, for `run` and `worker` alike: one setup, so that the two never differ in what a
 * user trying the tool sees.
 */

/**
 * Rankings drift every this many milliseconds of wall-clock time: runs a few seconds apart see results move, so that
 * change digests and the `changes` view have something to show (docs/client.md#the-simulator).
 */
export const CLI_SIMULATOR_DRIFT_MS = 5_000;

/** A simulator on loopback with a key of its own (`name` in its stats), answering 20-80 ms late, drifting. */
export function startCliSimulator(name: string, credits: number): Promise<Simulator> {
  return startSimulator({
    latencyMs: { min: 20, max: 80 },
    driftEveryMs: CLI_SIMULATOR_DRIFT_MS,
    keys: [{ key: `sim_${crypto.randomUUID()}`, name, ratePerSecond: 10, burst: 5, credits }],
  });
}

/**
 * What a run is given to work against the simulator: its address and key, and the environment with the simulator's
 * host added to WEBDATA_ALLOWED_HOSTS. The simulator's own key goes to the simulator: the allow-list of the real key's
 * hosts admits it, and still holds for everything else the run sends to (its webhooks).
 */
export function simulatorTarget(sim: Simulator, env: NodeJS.ProcessEnv): Pick<RunOptions, 'baseUrl' | 'apiKey' | 'sources' | 'env'> {
  return { baseUrl: sim.url, apiKey: sim.apiKey, sources: { baseUrl: '--simulator', credentials: 'the built-in simulator' }, env: withSimulatorAllowed(env, sim.url) };
}

/** WEBDATA_ALLOWED_HOSTS with the simulator's host added, when it is set (unset, any host is allowed). */
function withSimulatorAllowed(env: NodeJS.ProcessEnv, simulatorUrl: string): Record<string, string | undefined> {
  const list = env.WEBDATA_ALLOWED_HOSTS;
  if (list === undefined || list.trim() === '') return env;
  return { ...env, WEBDATA_ALLOWED_HOSTS: `${list},${new URL(simulatorUrl).hostname}` };
}
