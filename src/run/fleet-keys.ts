import { ValidationError } from '../errors/validation-error.ts';
import type { RunHost } from '../host/run-host.ts';
import type { LimitStore } from '../state/limit-store.ts';
import type { KeyIdentities } from './remembered-limits.ts';

/**
 * A worker of a distributed run sends with the keys of its own environment, by label: a label must stand for one key
 * across the fleet, or two keys would share one key's pace, share and retirement. Each label is claimed for this
 * worker's key by its fingerprint (the state schema's secret); one the run holds another key under refuses this
 * worker before it sends anything (docs/distributed.md#a-pool-of-keys-across-workers).
 */
export async function claimFleetKeys(host: RunHost, store: LimitStore, identities: KeyIdentities | undefined): Promise<void> {
  if (host.claimKeys === undefined || identities === undefined) return;
  const others = await host.claimKeys(identities.fingerprints(await store.keySecret()));
  if (others.length === 0) return;
  throw new ValidationError(
    'The keys of this worker',
    others.map((label) => ({
      path: `WEBDATA_API_KEYS (${label})`,
      message: `the run's other workers send with another key under the label "${label}": give every worker of a run the same keys under the same labels`,
    })),
  );
}
