/*
 * The statements this floor sends on any database, by name (the pg-boss `plans.ts` way): a transaction's bounds and
 * the session-level advisory lock. What is sent under them is the callers' (each floor's own statements.ts).
 */

/** A transaction on one connection (`transaction` in pools.ts). */
export const transactionStatements = {
  begin: 'BEGIN',
  commit: 'COMMIT',
  rollback: 'ROLLBACK',
};

/** A session-level advisory lock, named by text (`$1`) and keyed by its 64-bit hash: taken at once, or not at all. */
export const advisoryLockStatements = {
  tryLock: 'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked',
};
