/** Why a key takes no more requests: for the run (a 401), or for one endpoint (a 402, a 403), or its credits' share. */
export interface Retirement {
  reason: 'unauthorized' | 'payment_required' | 'forbidden' | 'budget';
  message: string;
  /** Clock time. */
  at: number;
  /** The endpoint it is retired for; none: for the run. */
  path?: string | undefined;
}

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
