import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type Database from 'better-sqlite3';
import { LeaseHeldError, type LeaseHolder } from '../../errors/lease-held-error.ts';
import type { Lease } from '../interfaces.ts';
import { quoteIdentifier } from '../../sql-identifier.ts';
import { LEASE_SQL } from './statements.ts';

/** How long a lease lives without renewal; holders renew at a third of it. */
export const LEASE_TTL_MS = 60_000;

interface LeaseRow {
  key: string;
  pipeline: string;
  holder: string;
  pid: number;
  host: string;
  acquired_at: string;
  renewed_at: number;
}

const holderOf = (row: LeaseRow): LeaseHolder => ({ pipeline: row.pipeline, pid: row.pid, host: row.host, since: row.acquired_at });
const by = (h: LeaseHolder) => `pid ${h.pid} on ${h.host}, since ${h.since}`;

/**
 * One run per state store at a time: a second invocation of the same pipeline, or another pipeline whose state lives
 * in the same file (the page journal's sequence is the store's, so two writers would break each other's commits).
 * A holder that died (its process is gone, or it stopped renewing) is replaced.
 */
export function acquireLease(db: Database.Database, pipeline: string, ttlMs = LEASE_TTL_MS): Lease {
  // `pipeline` is the row's key: the table predates output leases, and old rows stay readable.
  db.exec(LEASE_SQL.storeTable);
  return hold(db, { table: 'lease', keyColumn: 'pipeline', key: pipeline, pipeline, ttlMs }, (live) => {
    const other = live[0] as LeaseRow;
    const holder = holderOf(other);
    return new LeaseHeldError(
      other.pipeline === pipeline
        ? `pipeline "${pipeline}" is already running (${by(holder)}): one run of a pipeline at a time. ` +
            'Wait for it to finish, or stop it (Ctrl-C, or kill the process) and run again.'
        : `the state store ${db.name} is in use by pipeline "${other.pipeline}" (${by(holder)}): two pipelines cannot run on one ` +
            `state store at once. Wait for it to finish, or give pipeline "${pipeline}" its own state.path.`,
      holder,
    );
  });
}

/**
 * One writer per output at a time (a file, or a table of a database), whichever pipeline it belongs to: the lease
 * lives beside the output (in its database, or in the directory's output registry), where every pipeline looks.
 */
export function leaseOutput(
  db: Database.Database,
  output: { key: string; label: string },
  pipeline: string,
  options: { ttlMs?: number; whileProcessLives?: boolean } = {},
): Lease {
  db.exec(LEASE_SQL.outputTable);
  const ttlMs = options.ttlMs ?? LEASE_TTL_MS;
  return hold(db, { table: 'output_leases', keyColumn: 'output', key: output.key, pipeline, ttlMs, only: true, whileProcessLives: options.whileProcessLives === true }, (live) => {
    const holder = holderOf(live[0] as LeaseRow);
    return new LeaseHeldError(
      `${output.label} is being written by ${holder.pipeline === pipeline ? 'another run of' : ''} pipeline "${holder.pipeline}" (${by(holder)}): ` +
        'one writer per output at a time. Wait for it to finish, or write to another output.',
      holder,
    );
  });
}

interface HoldOptions {
  /** The state store's lease table and its key: names of ours, never a user's. */
  table: 'lease' | 'output_leases';
  keyColumn: 'pipeline' | 'output';
  key: string;
  pipeline: string;
  ttlMs: number;
  /** Only the row of this key conflicts (output leases); otherwise any live row does (the state store's). */
  only?: boolean;
  /** A holder on this host is alive while its process is, renewed or not (a frozen process may wake and write). */
  whileProcessLives?: boolean;
}

function hold(db: Database.Database, options: HoldOptions, refuse: (live: LeaseRow[]) => Error): Lease {
  const { key, pipeline, ttlMs } = options;
  const [table, k] = [quoteIdentifier(options.table), quoteIdentifier(options.keyColumn)];
  const holder = randomBytes(8).toString('hex');
  const host = hostname();
  const hasPipeline = options.table !== 'lease';
  const read = db.prepare(LEASE_SQL.read(table, k, hasPipeline, options.only === true));
  const write = db.prepare(LEASE_SQL.write(table, k, hasPipeline));
  const drop = db.prepare(LEASE_SQL.drop(table, k));
  const renew = db.prepare(LEASE_SQL.renew(table, k));

  db.transaction(() => {
    const rows = (options.only ? read.all(key) : read.all()) as LeaseRow[];
    const live = rows.filter((row) => isAlive(row, host, ttlMs, options.whileProcessLives === true));
    if (live.length > 0) throw refuse(live);
    // Rows of holders that died are taken over (this key) or cleared (the others).
    for (const row of rows) if (row.key !== key) drop.run(row.key, row.holder);
    write.run(...[key, ...(hasPipeline ? [pipeline] : []), holder, process.pid, host, new Date().toISOString(), Date.now()]);
  }).immediate();

  const timer = setInterval(() => {
    try {
      renew.run(Date.now(), key, holder);
    } catch {
      // A busy database delays a renewal; the next one (a third of the TTL later) catches up.
    }
  }, Math.max(1000, Math.floor(ttlMs / 3)));
  timer.unref();

  return {
    release(): void {
      clearInterval(timer);
      try {
        if (db.open) drop.run(key, holder);
      } catch {
        // Releasing runs while a run is closing, often because its disk filled: an error here would hide
        // the one that ended the run. A row left behind is taken over by the next run, its holder being gone.
      }
    },
  };
}

function isAlive(lease: LeaseRow, host: string, ttlMs: number, whileProcessLives: boolean): boolean {
  if (Date.now() - lease.renewed_at > ttlMs && !(whileProcessLives && lease.host === host)) return false;
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
