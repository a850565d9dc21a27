import { retrying } from '../../postgres/failure.ts';
import { type PoolClient, transaction } from '../../postgres/pools.ts';
import { periodAt } from '../../schedule/allowance-period.ts';
import { sameAllowance } from '../../schedule/allowance.ts';
import type { AllowanceDeclaration, AllowanceStore, AllowanceUsage, DeclaredAllowance, RecordedAllowance } from '../allowance-store.ts';
import { allowanceStatements } from './statements.ts';
import { type StoreParts, storeQuery } from './store-parts.ts';

type Row = { credits: number; per: RecordedAllowance['per']; timezone: string; pipeline: string; label: string; declared_at: Date };

const recorded = (row: Row): RecordedAllowance => ({
  credits: row.credits,
  per: row.per,
  timezone: row.timezone,
  pipeline: row.pipeline,
  label: row.label,
  declaredAt: row.declared_at.toISOString(),
});

/**
 * Keys' allowances in PostgreSQL (docs/credits.md#allowances), the schema's like keys' limits: they bind every
 * pipeline whose state is in the schema, on any machine. A declaration or a hold of a key decides in one transaction
 * under the key's row lock (`FOR UPDATE`), so that deciders of one key take turns; what the period has taken is read in
 * one statement (a spend row moving out of a hold into the ledger is seen on one side of it, never both or neither).
 * The period is the server's clock's (now()).
 */
export function postgresAllowances(parts: StoreParts): AllowanceStore {
  const sql = allowanceStatements(parts.s);
  const inTransaction = <T>(work: (client: PoolClient) => Promise<T>) =>
    // Safe to send again: a declaration decides the same, and a hold granted twice only holds more, given back at the end.
    retrying(parts.where, () => transaction(parts.pool, work), { idempotent: true });
  return {
    declareAllowance: (declaration) => inTransaction((client) => declare(client, sql, declaration)),
    holdAllowance: (request) =>
      inTransaction(async (client) => {
        const [row] = (await client.query<Row & { store_time: Date }>(sql.lockAllowance, [request.fingerprint])).rows;
        if (!row) return undefined;
        const storeTime = row.store_time.getTime();
        const period = periodAt(storeTime, row.per, row.timezone);
        await client.query(sql.dropExpired, [request.fingerprint, request.holder]);
        type Usage = { spent: number; held: number; mine: number };
        const [usage] = (await client.query<Usage>(sql.usage, [request.fingerprint, period.key, request.holder])).rows as [Usage];
        const granted = Math.max(0, Math.min(request.want, row.credits - usage.spent - usage.held));
        await client.query(sql.hold, [request.fingerprint, period.key, request.holder, request.pipeline, request.runId, granted, request.ttlMs]);
        return { granted, allowance: recorded(row), period, spent: usage.spent, held: usage.held + granted, mine: usage.mine + granted, storeTime };
      }),
    async giveBackAllowance(fingerprint, period, holder, credits) {
      if (credits > 0) await storeQuery(parts, sql.giveBack, [fingerprint, period, holder, credits]);
    },
    async renewAllowanceHolds(holder, ttlMs) {
      await storeQuery(parts, sql.renew, [holder, ttlMs]);
    },
    async releaseAllowanceHolds(holder) {
      await storeQuery(parts, sql.release, [holder]);
    },
    async allowanceUsage(query) {
      const [row] = await storeQuery<AllowanceUsage>(parts, sql.usageOfRun, [query.fingerprint, query.period, query.runId, query.since]);
      return row as AllowanceUsage;
    },
  };
}

/** A declaration, in its transaction: recorded first, or read under the key's lock and decided there. */
async function declare(client: PoolClient, sql: ReturnType<typeof allowanceStatements>, declaration: AllowanceDeclaration): Promise<DeclaredAllowance> {
  const { fingerprint, label, pipeline, allowance } = declaration;
  const values = allowance ? [fingerprint, allowance.credits, allowance.per, allowance.timezone, pipeline, label] : [];
  if (allowance) {
    const [first] = (await client.query<Row>(sql.recordNew, values)).rows;
    if (first) return { bound: recorded(first) };
  }
  const [row] = (await client.query<Row & { store_time: Date }>(sql.lockAllowance, [fingerprint])).rows;
  const found = row ? recorded(row) : undefined;
  if (allowance === null) return { bound: found ?? null };
  if (found && found.pipeline !== pipeline) return sameAllowance(found, allowance) ? { bound: found } : { conflict: found };
  if (found && sameAllowance(found, allowance) && found.label === label) return { bound: found };
  const [updated] = (await client.query<Row>(sql.recordAllowance, values)).rows;
  return { bound: recorded(updated as Row) };
}
