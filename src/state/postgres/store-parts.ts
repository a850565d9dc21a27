import { retrying } from '../../postgres/failure.ts';
import type { Pool } from '../../postgres/pools.ts';
import { storable } from '../../postgres/storable.ts';
import { type PostgresTarget, stateStoreWhere } from '../../postgres/target.ts';
import { quoteIdentifier } from '../../sql-identifier.ts';

/** What every role of a PostgreSQL store (and each of its fenced views) shares: the database, the schema, the pipeline. */
export interface StoreParts {
  readonly pool: Pool;
  readonly schema: string;
  /** The schema, quoted, as the statements take it. */
  readonly s: string;
  readonly pipeline: string;
  readonly target: PostgresTarget;
  /** Where it is, for what a failure to reach it says. */
  readonly where: string;
}

export function storeParts(pool: Pool, target: PostgresTarget, options: { schema: string; pipeline: string }): StoreParts {
  return { pool, schema: options.schema, s: quoteIdentifier(options.schema), pipeline: options.pipeline, target, where: stateStoreWhere(target) };
}

/**
 * A statement of the store, its rows. Past its opening (where an unreachable server stops the run at once, before any
 * request), the store waits out a server that went away: the statements sent this way are safe to repeat (those that
 * are not — a spend row's insert, a claim — say so where they are sent).
 */
export async function storeQuery<R extends object = Record<string, unknown>>(parts: StoreParts, text: string, values: unknown[] = []): Promise<R[]> {
  return retrying(parts.where, async () => (await parts.pool.query<R>(text, values.map(storable))).rows, { idempotent: true });
}
