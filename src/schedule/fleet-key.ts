import type { Retirement } from './key-pool.ts';

/**
 * A key of a pool as the other processes of a distributed run share it (docs/distributed.md#a-pool-of-keys-across-workers):
 * its share of the credits (`keys.<label>.maxCredits`) reserved across all of them, and its retirements told to them and
 * heard from them. Its pace is its pacer's (the scheduler's `pacer` factory, given the key's label). One key alone has
 * none: the run's own row and meter are its.
 */
export interface FleetKey {
  /** Reserves `weight` of the key's share across every process: false when the share cannot take it (no share: true). */
  reserve(weight: number): boolean | Promise<boolean>;
  /** A request `reserve` let through settled: `charged` of its `weight` was taken (0: none). */
  settle(weight: number, charged: number): void;
  /** Tells the others that this process retired the key (for the run, or for `retirement.path`). */
  retire(retirement: Retirement): void;
  /** The key's retirements the others told, as last heard (each slot of its pacer reads them). */
  heard(): readonly Omit<Retirement, 'at'>[];
}

/** The factory the scheduler's `fleet` option takes: the shared side of the key labelled `key`, with its share. */
export type FleetKeys = (key: string, maxCredits: number | undefined) => FleetKey;
