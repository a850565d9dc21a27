import type { RunHost } from '../host/run-host.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { LimitStore } from '../state/limit-store.ts';
import { type KeyIdentities, type LimitMemory, recallLimits } from './remembered-limits.ts';
import type { RunEvent } from './run-types.ts';

/**
 * What the state store remembers of the run's keys' limits: every worker of a distributed run starts its keys there
 * (the first to write a key's shared row sets its pace), and the one that leads at the end keeps what the run learned
 * (docs/pipelines.md#limits-remembered). None for a token or a client given to run() (no key to know it by).
 */
export async function limitMemory(store: LimitStore, host: RunHost, identities: KeyIdentities | undefined): Promise<LimitMemory | undefined> {
  if (identities === undefined) return undefined;
  const memory = await recallLimits(store, identities);
  // A distributed run's rate is learned by its leader alone: the others' throttles follow the shared row, and what
  // they measured of it is the leader's, late and partial.
  const learns = host.limits.learns;
  return learns === undefined ? memory : { starts: memory.starts, keep: async (keys) => (learns() ? memory.keep(keys) : undefined) };
}

/**
 * What the keys learned, kept for the next run. A memory that cannot be written fails nothing: the run's rows and
 * spend are what it is for; the next run learns again, and says so (a warning, redacted like every message).
 */
export async function keepLimits(memory: LimitMemory | undefined, scheduler: Scheduler, emit: (event: RunEvent) => void, redact: (text: string) => string): Promise<void> {
  if (memory === undefined) return;
  try {
    await memory.keep(scheduler.stats().keys);
  } catch (error) {
    emit({ type: 'warning', message: redact(`what the keys learned of the server's limit was not kept (the next run learns it again): ${error instanceof Error ? error.message : String(error)}`) });
  }
}
