import type pg from 'pg';
import { retrying } from './failure.ts';

/**
 * The server's session behind one connection: its process and when it started, so that it is told apart from a later
 * session that was given the same process id (after a restart).
 */
export interface ServerSession {
  readonly pid: number;
  readonly start: string;
}

/** A session's start in microseconds since the epoch, as text: the same whatever the session's time zone and date style. */
const STARTED = '(extract(epoch FROM backend_start) * 1000000)::bigint::text';

/** How long a cut connection's session may take to end once asked to, before the statement waiting on it fails. */
const ENDING_MS = 10_000;

/**
 * Asks a connection which session it is: from the statistics function of its own process alone, half the time the
 * whole `pg_stat_activity` view takes as a connection's first statement (0.9 against 1.8 ms).
 */
export async function sessionOf(client: pg.ClientBase): Promise<ServerSession> {
  const { rows } = await client.query<{ pid: number; start: string }>(`SELECT pid, ${STARTED} AS start FROM pg_stat_get_activity(pg_backend_pid())`);
  const row = rows[0];
  if (!row) throw new Error('a connection could not find its own session in pg_stat_get_activity');
  return { pid: row.pid, start: row.start };
}

// Each pooled connection's session, asked once in the connection's life: not a statement a page.
const known = new WeakMap<pg.ClientBase, Promise<ServerSession>>();

/** The session of a pool's connection: asked on its first use (or as it connects, `learnSession`), then remembered. */
export function knownSession(client: pg.ClientBase): Promise<ServerSession> {
  let session = known.get(client);
  if (!session) {
    session = sessionOf(client);
    known.set(client, session);
  }
  return session;
}

/**
 * A pool's hook on each new connection (node-postgres' `onConnect`, awaited before the pool hands the connection out):
 * it asks its session first, alone on it, so that the answer is in before anything of a page is sent on it.
 */
export async function learnSession(client: pg.ClientBase): Promise<void> {
  await knownSession(client);
}

/**
 * Ends a cut connection's session and waits (bounded) until the server has let go of it. A connection cut on the
 * client's side leaves its session running what it was sent — a statement waiting for a lock lands once it has it —
 * so a write whose answer was lost is asked after, or sent again, only once nothing of that session can still land
 * (docs/design.md#the-run-host). Waits out a server that went away as every statement does; a session gone with a
 * restart is found gone. Rejects if the session outlives `ENDING_MS`.
 */
export function endSession(db: { readonly pool: pg.Pool; readonly where: string }, session: ServerSession): Promise<void> {
  return retrying(
    db.where,
    async () => {
      const deadline = performance.now() + ENDING_MS;
      for (;;) {
        // The same role's own session: no privilege beyond the store's is needed to end it.
        const { rows } = await db.pool.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND ${STARTED} = $2`,
          [session.pid, session.start],
        );
        if (rows.length === 0) return;
        if (performance.now() > deadline) {
          throw new Error(`the session of a cut connection (process ${session.pid}) did not end within ${ENDING_MS / 1000} s: what it was sent may still land`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    { idempotent: true },
  );
}
