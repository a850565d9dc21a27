import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type Database from 'better-sqlite3';

/** How long a lease lives without renewal; holders renew at a third of it. */
export const LEASE_TTL_MS = 60_000;

export class LeaseHeldError extends Error {
  readonly holder: { pid: number; host: string; since: string };

  constructor(pipeline: string, holder: { pid: number; host: string; since: string }) {
    super(
      `pipeline "${pipeline}" is already running (pid ${holder.pid} on ${holder.host}, since ${holder.since}): ` +
        'one run of a pipeline at a time. Wait for it to finish, or stop it (Ctrl-C, or kill the process) and run again.',
    );
    this.name = 'LeaseHeldError';
    this.holder = holder;
  }
}

interface LeaseRow {
  holder: string;
  pid: number;
  host: string;
  acquired_at: string;
  renewed_at: number;
}

/**
 * A lease in the state store: one run of a pipeline at a time. A holder that died (its process is gone, or it
 * stopped renewing) is replaced; a live one makes the second invocation fail before it sends anything.
 */
export function acquireLease(db: Database.Database, pipeline: string, ttlMs = LEASE_TTL_MS) {
  db.exec(`CREATE TABLE IF NOT EXISTS lease (pipeline TEXT PRIMARY KEY, holder TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, acquired_at TEXT NOT NULL, renewed_at INTEGER NOT NULL)`);
  const holder = randomBytes(8).toString('hex');
  const host = hostname();
  const read = db.prepare(`SELECT holder, pid, host, acquired_at, renewed_at FROM lease WHERE pipeline = ?`);
  const write = db.prepare(`
    INSERT INTO lease (pipeline, holder, pid, host, acquired_at, renewed_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (pipeline) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, host = excluded.host,
      acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at`);
  const renew = db.prepare(`UPDATE lease SET renewed_at = ? WHERE pipeline = ? AND holder = ?`);
  const release = db.prepare(`DELETE FROM lease WHERE pipeline = ? AND holder = ?`);

  db.transaction(() => {
    const current = read.get(pipeline) as LeaseRow | undefined;
    if (current && isAlive(current, host, ttlMs)) {
      throw new LeaseHeldError(pipeline, { pid: current.pid, host: current.host, since: current.acquired_at });
    }
    write.run(pipeline, holder, process.pid, host, new Date().toISOString(), Date.now());
  }).immediate();

  const timer = setInterval(() => {
    try {
      renew.run(Date.now(), pipeline, holder);
    } catch {
      // A busy database delays a renewal; the next one (a third of the TTL later) catches up.
    }
  }, Math.max(1000, Math.floor(ttlMs / 3)));
  timer.unref();

  return {
    release(): void {
      clearInterval(timer);
      if (db.open) release.run(pipeline, holder);
    },
  };
}

export type Lease = ReturnType<typeof acquireLease>;

function isAlive(lease: LeaseRow, host: string, ttlMs: number): boolean {
  if (Date.now() - lease.renewed_at > ttlMs) return false;
  if (lease.host !== host) return true;
  if (lease.pid === process.pid) return true;
  try {
    process.kill(lease.pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
