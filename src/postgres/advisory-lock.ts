import type { Pool, PoolClient } from './pools.ts';

export interface HeldLock {
  /** The connection holding it, for statements that must run as the holder. */
  readonly client: PoolClient;
  /** Never fails: a lock it cannot give back goes with its connection. */
  release(): Promise<void>;
}

/**
 * Takes a session-level advisory lock on a connection of its own, held until released — or until the process dies,
 * when its connection and the lock go with it (no time to live to wait out, on any machine). Undefined when another
 * session holds it.
 */
export async function tryAdvisoryLock(pool: Pool, name: string): Promise<HeldLock | undefined> {
  const client = await pool.connect();
  try {
    const { rows } = await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked`, [name]);
    if (!rows[0]?.locked) {
      client.release();
      return undefined;
    }
  } catch (error) {
    client.release(error as Error);
    throw error;
  }
  // A connection cut while held (a server restart) loses the lock; what it guards has its own check (the journal's
  // sequence number refuses a second writer's page).
  client.on('error', () => undefined);
  return {
    client,
    async release() {
      try {
        await client.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [name]);
        client.release();
      } catch (error) {
        client.release(error as Error);
      }
    },
  };
}
