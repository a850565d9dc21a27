import type { RunHost } from '../host/run-host.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { LimitStore } from '../state/limit-store.ts';
import { type KeyIdentities, type LimitMemory, recallLimits } from './remembered-limits.ts';
import type { RunEvent } from './run-types.ts';

/**
 * What the state store remembers of the run's keys' limits, for a run of this process alone: a distributed run's
 * pacer is shared, and learned by its leader (docs/design.md#the-run-host). None for a token or a client given to
 * run() (no key to know it by).
 */
export async function limitMemory(store: LimitStore, host: RunHost, identities: KeyIdentities | undefined): Promise<LimitMemory | undefined> {
  if (identities === undefined || host.limits.pacer !== undefined) return undefined;
  return recallLimits(store, identities);
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
