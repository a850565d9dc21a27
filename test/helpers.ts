import { expect } from 'vitest';
import { ValidationError } from '../src/index.ts';
import { createClient, type ClientOptions } from '../src/client/index.ts';
import { type Simulator, type SimulatorOptions, startSimulator } from '../src/simulator/index.ts';

export const TEST_KEY = 'test_key_5f1d2c9a8b7e6f5a4b3c2d1e';

/** A simulator with one unlimited key named `main` unless keys are given. */
export async function simulator(options: SimulatorOptions = {}): Promise<Simulator> {
  return startSimulator({ keys: [{ key: TEST_KEY, name: 'main' }], ...options });
}

export function clientFor(sim: Simulator, options: Partial<ClientOptions> = {}) {
  return createClient({ baseUrl: sim.url, apiKey: TEST_KEY, ...options });
}

/** Resolves to the rejection of a promise, failing the test when it fulfils. */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection, but the promise fulfilled');
}

/** Waits for a condition the code under test will reach (polling: it may run in another process, or behind I/O). */
export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}

/** What a call threw (or undefined), for calls that may throw synchronously or reject. */
export async function thrown(call: () => unknown): Promise<unknown> {
  try {
    await call();
    return undefined;
  } catch (error) {
    return error;
  }
}

/** A ValidationError that names exactly `field`, for `reason`. */
export function expectRefused(error: unknown, field: string, reason: RegExp): void {
  expect(error).toBeInstanceOf(ValidationError);
  const issues = (error as ValidationError).issues;
  expect(issues.map((i) => i.path)).toEqual([field]);
  expect(issues[0]?.message).toMatch(reason);
}
