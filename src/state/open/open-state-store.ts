import type Database from 'better-sqlite3';
import type { Pool } from '../../postgres/pools.ts';
import type { PostgresTarget } from '../../postgres/target.ts';
import type { StateStore } from '../interfaces.ts';
import { postgresStateStore } from '../postgres/store.ts';
import { sqliteStateStore } from '../sqlite/store.ts';

/** Where a pipeline's state lives, once the runner has decided it (docs/design.md#the-state-store). */
export type StatePlace =
  | { readonly kind: 'sqlite'; readonly db: Database.Database; readonly clock?: (() => number) | undefined }
  | { readonly kind: 'postgres'; readonly pool: Pool; readonly target: PostgresTarget; readonly schema: string; readonly pipeline: string };

/**
 * The state store at `place`: the one place an implementation is chosen, so that what opens a store (a run, a
 * schedule's worker) knows none. A SQLite store commits a run's pages on a thread of its own, started with the first
 * page (docs/design.md#one-transaction-per-page); PostgreSQL's are one statement each.
 */
export function openStateStore(place: StatePlace): Promise<StateStore> {
  if (place.kind === 'sqlite') return Promise.resolve(sqliteStateStore(place.db, { commitThread: true, ...(place.clock ? { clock: place.clock } : {}) }));
  return postgresStateStore(place.pool, place.target, { schema: place.schema, pipeline: place.pipeline });
}
