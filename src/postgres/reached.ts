import type { PostgresTarget } from './target.ts';

/** A pool as far as this module needs it: its `connect` event, emitted for each connection it opens. */
interface Connecting {
  on(event: 'connect', listener: () => void): unknown;
}

/** What a failure on a pool can know of it: where it connects, and whether it ever has. */
export interface PoolContact {
  readonly target: PostgresTarget;
  readonly reached: boolean;
}

const contacts = new WeakMap<object, { target: PostgresTarget; reached: boolean }>();

/**
 * Watches `pool` for its first connection. A database this process never reached is one where nothing of this run
 * (or command) was ever committed, so a failure to reach it says nothing of committed data: it is a first contact,
 * where a wrong host or port, or a server not started, is the likely cause (`failure.ts`).
 */
export function watchContact(pool: Connecting & object, target: PostgresTarget): void {
  const contact = { target, reached: false };
  contacts.set(pool, contact);
  pool.on('connect', () => {
    contact.reached = true;
  });
}

/** What is known of `pool`'s contact with its database; undefined for a pool not opened by `openPool`. */
export function contactOf(pool: object | undefined): PoolContact | undefined {
  return pool === undefined ? undefined : contacts.get(pool);
}
