import type { Pool, PoolClient } from '../postgres/pools.ts';
import { storable } from '../postgres/storable.ts';
import { checkOutcomeColumns, outcomesTable, type SeriesOutcome, UNRECORDED } from './series-outcomes.ts';
import { postgresOutcomeStatements, postgresSinkStatements } from './statements.ts';

/**
 * The outcomes table beside a PostgreSQL results table (`series-outcomes.ts`), created when missing, in the caller's
 * transaction. Created beside a table that already holds runs (one written before outcomes were recorded), it records
 * each of them as complete (`unrecorded`), but `opening`, the run being opened now, which records its own as it closes.
 * Existence is looked up first: PostgreSQL checks the CREATE privilege before IF NOT EXISTS. Its indexes for the views are made
 * when missing, on a table made before it too.
 */
export async function preparePostgresOutcomes(client: PoolClient, schema: string, table: string, where: string, opening = ''): Promise<void> {
  const name = outcomesTable(table);
  const sql = postgresOutcomeStatements(schema, table);
  const existing = (await client.query<{ name: string }>(postgresSinkStatements.tableColumns, [schema, name])).rows.map((r) => r.name);
  checkOutcomeColumns(existing, name, where, 'postgres.table');
  if (existing.length === 0) {
    for (const statement of sql.create) await client.query(statement);
    await client.query(sql.backfill, [UNRECORDED, opening]);
  }
  await outcomesSeriesIndex(client, schema, table);
}

/**
 * The indexes the views walk (`seriesRunsIndex`, `runsIndex`), made on a table made before them too, as a run opens it
 * (a year of 365,000 rows: about a second). Looked up first: a role that may write the table but not own it cannot
 * make an index (42501), and its views then read the table whole as they did (analytics/postgres-views.ts asks). Two
 * runs opening the table at once (workers of a distributed run) both make them: the second waits on the first's name
 * in the catalog, then is refused it (23505) and finds them made.
 */
async function outcomesSeriesIndex(client: PoolClient, schema: string, table: string): Promise<void> {
  const sql = postgresOutcomeStatements(schema, table);
  if ((await client.query(sql.indexed, [schema, outcomesTable(table)])).rowCount === 1) return;
  await client.query(postgresSinkStatements.savepoint);
  try {
    await client.query(sql.seriesRunsIndex);
    await client.query(sql.runsIndex);
    await client.query(postgresSinkStatements.releaseSavepoint);
  } catch (error) {
    if (!['42501', '23505'].includes((error as { code?: string }).code ?? '')) throw error;
    await client.query(postgresSinkStatements.rollbackSavepoint);
  }
}

/** Writes, and takes back, the outcomes of a PostgreSQL results table's runs. */
export function postgresOutcomes(pool: Pool, schema: string, table: string) {
  const sql = postgresOutcomeStatements(schema, table);
  // The first outcome this process records of a run is written whatever it is: the run is in the table from then on.
  let recorded: string | undefined;
  return {
    /**
     * One statement for the slice: one array per column. Each series' row where the run reached it, and a
     * `not_reached` one only where that is news (docs/analytics.md#failed-and-unreached-series).
     */
    record: async (runId: string, outcomes: readonly SeriesOutcome[]) => {
      if (outcomes.length === 0) return;
      const force = recorded !== runId;
      await pool.query(sql.record, [
        ...[
          runId,
          outcomes.map((o) => o.query),
          outcomes.map((o) => o.country),
          outcomes.map((o) => o.lang),
          outcomes.map((o) => (o.complete ? 1 : 0)),
          outcomes.map((o) => o.reason),
        ].map(storable),
        force,
      ]);
      recorded = runId;
    },
    /** In the caller's transaction, with the run's rows. */
    discard: async (client: PoolClient, runId: string) => void (await client.query(sql.discard, [runId])),
    /** The run's rows alone stay (a `replace` table's run finished), a series not reached since before still said so. */
    async keepOnly(client: PoolClient, runId: string) {
      await client.query(sql.carry, [runId]);
      await client.query(sql.keepOnly, [runId]);
    },
  };
}
