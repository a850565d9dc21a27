import type Database from 'better-sqlite3';
import { periodAt } from '../../schedule/allowance-period.ts';
import { sameAllowance } from '../../schedule/allowance.ts';
import type { AllowanceDeclaration, AllowanceHold, AllowanceUsage, AllowanceStore, DeclaredAllowance, HoldRequest, RecordedAllowance } from '../allowance-store.ts';
import { allowanceStatements } from './key-statements.ts';

/**
 * Keys' allowances in a SQLite state file (docs/credits.md#allowances), binding every pipeline whose state is the
 * file. Each decision is one transaction begun IMMEDIATE: it takes the file's write lock first, so that any number of
 * processes deciding at once decide one after the other, each seeing what the one before held or spent. SQLite has no
 * server clock: the store's is `clock` (this machine's, unless a test gives its own), as for occurrences.
 */
export function sqliteAllowances(db: Database.Database, clock: () => number): AllowanceStore {
  const statements = allowanceStatements(db);
  const recorded = (fingerprint: string) => statements.allowanceOf.get(fingerprint) as RecordedAllowance | undefined;

  const declare = db.transaction((declaration: AllowanceDeclaration): DeclaredAllowance => {
    const { fingerprint, label, pipeline, allowance } = declaration;
    const found = recorded(fingerprint);
    if (allowance === null) return { bound: found ?? null };
    // Another pipeline's allowance stands as it is; one like it binds alike.
    if (found && found.pipeline !== pipeline) return sameAllowance(found, allowance) ? { bound: found } : { conflict: found };
    if (found && sameAllowance(found, allowance) && found.label === label) return { bound: found };
    const mine: RecordedAllowance = { ...allowance, pipeline, label, declaredAt: new Date(clock()).toISOString() };
    statements.recordAllowance.run({ fingerprint, ...mine });
    return { bound: mine };
  });

  const hold = db.transaction((request: HoldRequest): AllowanceHold | undefined => {
    const allowance = recorded(request.fingerprint);
    if (!allowance) return undefined;
    const now = clock();
    const period = periodAt(now, allowance.per, allowance.timezone);
    const { fingerprint, holder } = request;
    statements.dropExpired.run({ fingerprint, now, holder });
    const usage = statements.usage.get({ fingerprint, period: period.key, holder }) as { spent: number; held: number; mine: number };
    const granted = Math.max(0, Math.min(request.want, allowance.credits - usage.spent - usage.held));
    statements.hold.run({ fingerprint, period: period.key, holder, pipeline: request.pipeline, runId: request.runId, granted, expiresAt: now + request.ttlMs });
    return { granted, allowance, period, spent: usage.spent, held: usage.held + granted, mine: usage.mine + granted, storeTime: now };
  });

  return {
    async declareAllowance(declaration) {
      return declare.immediate(declaration);
    },
    async holdAllowance(request) {
      return hold.immediate(request);
    },
    async giveBackAllowance(fingerprint, period, holder, credits) {
      if (credits > 0) statements.takeOutOfHold.run({ fingerprint, period, holder, credits });
    },
    async renewAllowanceHolds(holder, ttlMs) {
      statements.renew.run({ holder, expiresAt: clock() + ttlMs });
    },
    async releaseAllowanceHolds(holder) {
      statements.release.run(holder);
    },
    async allowanceUsage(query) {
      return statements.usageOfRun.get({ ...query, now: clock() }) as AllowanceUsage;
    },
  };
}
