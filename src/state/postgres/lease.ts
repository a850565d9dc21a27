import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { LeaseHeldError } from '../../errors/lease-held-error.ts';
import { tryAdvisoryLock } from '../../postgres/advisory-lock.ts';
import type { Pool } from '../../postgres/pools.ts';
import type { Lease } from '../interfaces.ts';
import type { runStatements } from './statements.ts';

/**
 * One run of a pipeline at a time, across every machine using this database: an advisory lock held for the run's
 * length (it goes with a dead holder's connection). The `leases` row only says who holds it, for another run's message.
 */
export async function leasePipeline(pool: Pool, sql: ReturnType<typeof runStatements>, schema: string, pipeline: string): Promise<Lease> {
  const lock = await tryAdvisoryLock(pool, `webdata-etl:${schema}:${pipeline}`);
  if (!lock) {
    const holder = (await pool.query<{ pid: number; host: string; acquired_at: Date }>(sql.leaseHolder, [pipeline])).rows[0];
    const since = holder?.acquired_at.toISOString() ?? 'unknown';
    const who = holder ? `pid ${holder.pid} on ${holder.host}, since ${since}` : 'another process';
    throw new LeaseHeldError(
      `pipeline "${pipeline}" is already running (${who}): one run of a pipeline at a time. Wait for it to finish, or stop it (Ctrl-C, or kill the process) and run again. ` +
        '(Many processes share a run when its state and every sink are in one PostgreSQL database and its dedupe is per series: see docs/distributed.md.)',
      { pipeline, pid: holder?.pid ?? 0, host: holder?.host ?? 'unknown', since },
    );
  }
  const holder = randomBytes(8).toString('hex');
  try {
    await lock.client.query(
      sql.takeLease,
      [pipeline, holder, process.pid, hostname()],
    );
  } catch (error) {
    await lock.release();
    throw error;
  }
  return {
    async release() {
      await lock.client.query(sql.giveLease, [pipeline, holder]).catch(() => undefined);
      await lock.release();
    },
  };
}
