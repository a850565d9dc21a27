import { type RateStart, rateStartSchema } from '../schedule/options.ts';
import type { KeyStats } from '../schedule/types.ts';
import type { LimitStore, RememberedLimit } from '../state/limit-store.ts';

/**
 * How long a remembered limit is trusted: a plan's limit changes seldom, but it does (a plan bought, a limit lowered).
 * Older, the next run still starts at it, but as a first guess: probed past within seconds, and a 429 at it taken
 * as a limit that fell (docs/scheduler.md#a-remembered-start).
 */
export const TRUSTED_FOR_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * The run's keys as the state store may know them: the API they go to and, under a database's secret, each key's
 * fingerprint by its label (run-client.ts). The keys themselves stay with their clients.
 */
export interface KeyIdentities {
  /** The base URL's origin and path: a key's limit is its service's. */
  readonly api: string;
  fingerprints(secret: Uint8Array): ReadonlyMap<string, string>;
}

/** What the store remembered of the run's keys, as the scheduler's starts, and how to keep what they learn. */
export interface LimitMemory {
  /** Each key's start by its label: those the store remembered. */
  readonly starts: ReadonlyMap<string, RateStart>;
  /** Keeps what the keys learned in this run (their stats' `known`, when measured here), by fingerprint. */
  keep(keys: readonly KeyStats[]): Promise<void>;
}

/**
 * What the store remembers of these keys' limits (docs/scheduler.md#a-remembered-start), as starts for the run's
 * scheduler, and a `keep` for the run's end, however it ends (what was learned before a failure is still worth
 * keeping). A distributed run's worker can call this with its store and keys the same way.
 */
export async function recallLimits(store: LimitStore, keys: KeyIdentities, now: () => number = Date.now): Promise<LimitMemory> {
  const fingerprints = keys.fingerprints(await store.keySecret());
  const remembered = await store.rememberedLimits(keys.api, [...fingerprints.values()]);
  const byFingerprint = new Map(remembered.map((limit) => [limit.fingerprint, limit]));
  const starts = new Map<string, RateStart>();
  for (const [label, fingerprint] of fingerprints) {
    const limit = byFingerprint.get(fingerprint);
    if (!limit) continue;
    // A row is a local file's: one that is no start (a rate of 0, text, a limit above its failure) is as none, and the
    // key learns again, rather than the run failing on its scheduler's options.
    const start = rateStartSchema.safeParse({ rate: limit.rate, above: limit.above, trusted: now() - Date.parse(limit.learnedAt) < TRUSTED_FOR_MS });
    if (start.success && Number.isFinite(start.data.rate) && (start.data.above ?? Number.POSITIVE_INFINITY) >= start.data.rate) starts.set(label, start.data);
  }
  return {
    starts,
    async keep(stats) {
      const learnedAt = new Date(now()).toISOString();
      const learned: RememberedLimit[] = [];
      for (const key of stats) {
        const fingerprint = fingerprints.get(key.label);
        // Only what this run measured: a start it only ran at keeps its age, and a key at its configured rate, under
        // the server's limit, taught nothing of it.
        if (fingerprint === undefined || !key.known?.measured || !(Number.isFinite(key.known.rate) && key.known.rate > 0)) continue;
        learned.push({ fingerprint, api: keys.api, rate: key.known.rate, above: key.known.above, learnedAt });
      }
      await store.rememberLimits(learned);
    },
  };
}
