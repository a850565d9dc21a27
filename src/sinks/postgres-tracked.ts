import type { Pool, PoolClient } from '../postgres/pools.ts';
import { storable } from '../postgres/storable.ts';
import { trackedTable, type TrackedRow } from './series-tracked.ts';
import { postgresSinkStatements, postgresTrackedStatements } from './statements.ts';

/** The tracked table beside a PostgreSQL results table (series-tracked.ts), created when missing, in the caller's transaction. */
export async function preparePostgresTracked(client: PoolClient, schema: string, table: string): Promise<void> {
  // Existence first: PostgreSQL checks the CREATE privilege before IF NOT EXISTS.
  if (await trackedExists(client, schema, table)) return;
  for (const statement of postgresTrackedStatements(schema, table).create) await client.query(statement);
}

async function trackedExists(client: Pool | PoolClient, schema: string, table: string): Promise<boolean> {
  return (await client.query(postgresSinkStatements.tableColumns, [schema, trackedTable(table)])).rows.length > 0;
}

/** Writes, and takes back, a PostgreSQL results table's tracked ranks; a table that has none (never tracked) is left alone. */
export function postgresTracked(pool: Pool, schema: string, table: string) {
  const sql = postgresTrackedStatements(schema, table);
  return {
    /** One statement for the slice: one array per column. */
    record: async (runId: string, rows: readonly TrackedRow[]) => {
      if (rows.length === 0) return;
      await pool.query(
        sql.record,
        [runId, rows.map((r) => r.query), rows.map((r) => r.country), rows.map((r) => r.lang), rows.map((r) => r.domain), rows.map((r) => r.rank), rows.map((r) => r.searched)].map(storable),
      );
    },
    /** In the caller's transaction, with the run's rows. */
    discard: async (client: PoolClient, runId: string) => void ((await trackedExists(client, schema, table)) && (await client.query(sql.discard, [runId]))),
    keepOnly: async (client: PoolClient, runId: string) => void ((await trackedExists(client, schema, table)) && (await client.query(sql.keepOnly, [runId]))),
  };
}
