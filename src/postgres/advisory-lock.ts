import type pg from 'pg';
import { type Pool, pgDriver } from './pools.ts';
import { advisoryLockStatements } from './statements.ts';

export interface HeldLock {
  /** The connection holding it, for statements that must run as the holder. */
  readonly client: pg.Client;
  /** Never fails: a lock it cannot give back goes with its connection. */
  release(): Promise<void>;
}

/**
 * Takes a session-level advisory lock on a connection of its own, held until released — or until the process dies,
 * when its connection and the lock go with it (no time to live to wait out, on any machine). Undefined when another
 * session holds it. The connection is the pool's settings but not one of its connections: locks held for a run's
 * length would otherwise leave the pool none for the run's statements.
 */
export async function tryAdvisoryLock(pool: Pool, name: string): Promise<HeldLock | undefined> {
  const client = new (pgDriver().Client)(pool.options);
  const end = () => client.end().catch(() => undefined);
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ locked: boolean }>(advisoryLockStatements.tryLock, [name]);
    if (!rows[0]?.locked) {
      await end();
      return undefined;
    }
  } catch (error) {
    await end();
    throw error;
  }
  // A connection cut while held (a server restart) loses the lock; what it guards has its own check (the journal's
  // sequence number refuses a second writer's page). Closing the connection lets go of the lock.
  return { client, release: end };
}
