import { ValidationError } from '../../errors/validation-error.ts';
import { atDatabase } from '../../postgres/failure.ts';
import { openPool } from '../../postgres/pools.ts';
import type { PostgresTarget } from '../../postgres/target.ts';
import { quoteIdentifier } from '../../sql-identifier.ts';
import { type PruneDatabase, type PruneKind, type PruneScope, RUN_KINDS } from '../prune.ts';
import { pruneStatements } from './prune-statements.ts';
import { POSTGRES_STATE_VERSION } from './schema.ts';

/**
 * A PostgreSQL state schema as `prune` sees it (docs/cli.md#prune): every pipeline of the schema, each batch one
 * statement on a connection of its own (no transaction held between them). A schema of another version is refused.
 */
export async function postgresPruneDatabase(target: PostgresTarget, schema: string): Promise<PruneDatabase> {
  const pool = openPool(target, 1);
  const sql = pruneStatements(quoteIdentifier(schema));
  const query = async (text: string, values: unknown[] = []) => atDatabase(`the state store ${target.label}`, async () => (await pool.query(text, values)).rows, pool);
  try {
    if ((await query(sql.schemaExists, [schema])).length === 0) {
      throw new ValidationError('Invalid state store', [{ path: 'state.schema', message: `${target.label} has no schema "${schema}": no run kept its state there` }]);
    }
    const version = Number((await query(sql.version))[0]?.version ?? 0);
    if (version !== POSTGRES_STATE_VERSION) {
      throw new ValidationError('Invalid state store', [
        {
          path: 'state.schema',
          message: `${target.label}, schema "${schema}", holds state schema ${version}; this webdata-etl prunes schema ${POSTGRES_STATE_VERSION}: ${version < POSTGRES_STATE_VERSION ? 'run the pipeline once with it (the run brings the schema up), then prune' : 'prune with the newer webdata-etl that wrote it'}`,
        },
      ]);
    }
  } catch (error) {
    await pool.end();
    throw error;
  }
  const params = (scope: PruneScope) => [scope.runId ?? scope.before?.toISOString(), scope.pipeline];
  const sizes = new Map<PruneKind, { bytes: number; rows: number }>();
  return {
    label: `${target.label} (schema ${schema})`,
    store: 'postgres',
    runKinds: RUN_KINDS,
    pipelines: async () => (await query(sql.pipelines)).map((row) => row.pipeline as string),
    runsOf: async (pipeline) => (await query(sql.runsOf, [pipeline])) as { runId: string; status: string }[],
    heldRuns: async () => new Set((await query(sql.heldRuns)).map((row) => row.run_id as string)),
    hasAllowances: async () => (await query(sql.hasAllowances)).length > 0,
    count: async (kind, scope) => Number((await query(sql.of(kind).count, params(scope)))[0]?.n ?? 0),
    remove: async (kind, scope, limit) => {
      const statement = sql.of(kind).remove;
      const result = await atDatabase(`the state store ${target.label}`, () => pool.query(statement, [...params(scope), limit]), pool);
      return result.rowCount ?? 0;
    },
    bytes: async (kind, rows) => {
      let size = sizes.get(kind);
      if (!size) {
        const { table, bytesOf, rowsOf } = sql.of(kind);
        size = { bytes: Number((await query(bytesOf, [table]))[0]?.n ?? 0), rows: Number((await query(rowsOf))[0]?.n ?? 0) };
        sizes.set(kind, size);
      }
      return size.rows === 0 ? 0 : Math.round((size.bytes * Math.min(rows, size.rows)) / size.rows);
    },
    close: async () => {
      await pool.end();
    },
  };
}
