import type Database from 'better-sqlite3';
import type { SpendRow, SpendStore } from '../spend-store.ts';
import { allowanceStatements } from './key-statements.ts';
import { spendDay } from '../spend-day.ts';
import { spendStatements } from './statements.ts';

/** A spend row as `insertSpend` takes it, with the day it falls on (`spendDay`). */
export function spendValues(row: SpendRow, day: string | null): unknown[] {
  const key = row.key;
  return [
    row.runId,
    row.at,
    row.seriesId,
    row.path,
    row.attempt,
    row.status,
    row.credits,
    row.uncertain ? 1 : 0,
    row.latencyMs,
    row.uncommitted ? 1 : 0,
    key?.fingerprint ?? null,
    key?.label ?? null,
    row.pipeline ?? null,
    key?.period ?? null,
    day,
  ];
}

/**
 * A spend row's write on `db`, inside the caller's transaction: the row into the ledger, and its credits out of the
 * allowance's hold they were held under (docs/credits.md#holds), so that they count once, held or spent.
 */
export function spendWriter(db: Database.Database): (row: SpendRow) => void {
  const { insertSpend, zoneOf } = spendStatements(db);
  const { takeOutOfHold } = allowanceStatements(db);
  return (row) => {
    // Its day on the clocks of its key's allowance, as recorded now (UTC: none), for webdata_spend.
    const fingerprint = row.key?.fingerprint;
    const zone = fingerprint ? (zoneOf.get(fingerprint) as string | undefined) : undefined;
    insertSpend.run(...spendValues(row, spendDay(row.at, zone)));
    const key = row.key;
    if (key?.holder && key.period !== null && key.fingerprint !== null && row.credits > 0) {
      takeOutOfHold.run({ fingerprint: key.fingerprint, period: key.period, holder: key.holder, credits: row.credits });
    }
  };
}

/** The spend ledger in a SQLite state file (docs/design.md#spend-however-a-run-ends). */
export function sqliteSpend(db: Database.Database): SpendStore {
  const statements = spendStatements(db);
  const writeRow = spendWriter(db);
  const write = db.transaction((rows: readonly SpendRow[]) => {
    for (const row of rows) writeRow(row);
  });
  return {
    async spend(rows) {
      // The write lock first: the row's day reads the key's zone before it writes, and a deferred transaction whose
      // snapshot another connection's commit (the commit thread's, another process's) made stale is refused at once,
      // busy timeout or not (test/state/spend-write-lock.test.ts).
      write.immediate(rows);
    },
    async spendOf(runId) {
      const totals = statements.spendOf.get(runId) as { spent: number; uncertain: number; uncommitted: number; requests: number; retries: number };
      const byStatus = Object.fromEntries((statements.spendByStatus.all(runId) as { status: string; n: number }[]).map((r) => [r.status, r.n]));
      const byEndpoint = Object.fromEntries((statements.spendByPath.all(runId) as { path: string; credits: number }[]).map((r) => [r.path, r.credits]));
      return { ...totals, byStatus, byEndpoint };
    },
  };
}
