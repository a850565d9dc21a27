import { retrying } from '../../postgres/failure.ts';
import { storable } from '../../postgres/storable.ts';
import type { SpendRow, SpendStore } from '../spend-store.ts';
import { insertSpend, moveHeld } from './page-statement.ts';
import { spendStatements } from './statements.ts';
import { type StoreParts, storeQuery } from './store-parts.ts';

type Totals = { spent: number; uncertain: number; uncommitted: number; requests: number; retries: number };

/** The spend ledger in PostgreSQL (docs/design.md#spend-however-a-run-ends). */
export function postgresSpend(parts: StoreParts): SpendStore {
  const sql = spendStatements(parts.s);
  const write = async (rows: readonly SpendRow[]) => {
    if (rows.length === 0) return;
    const values: unknown[] = [];
    const p = (value: unknown) => `$${values.push(storable(value))}`;
    const insert = insertSpend(parts.s, p, rows);
    // The rows' credits move out of their holds in the same statement (docs/credits.md#holds).
    const moved = moveHeld(parts.s, p, rows);
    await parts.pool.query(moved ? `WITH w_spend AS (${insert}), w_held AS (${moved}) SELECT 1` : insert, values);
  };
  return {
    // Not idempotent: a lost answer may hide a written row, so only a failure to send is tried again.
    spend: (rows) => retrying(parts.where, () => write(rows), { idempotent: false }),
    async spendOf(runId) {
      const totals = (await storeQuery<Totals>(parts, sql.spendTotals, [runId]))[0] as Totals;
      const byStatus = await storeQuery<{ status: string; n: number }>(parts, sql.spendByStatus, [runId]);
      const byPath = await storeQuery<{ path: string; credits: number }>(parts, sql.spendByPath, [runId]);
      return { ...totals, byStatus: Object.fromEntries(byStatus.map((r) => [r.status, r.n])), byEndpoint: Object.fromEntries(byPath.map((r) => [r.path, r.credits])) };
    },
  };
}
