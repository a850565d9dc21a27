import { existsSync } from 'node:fs';
import { ValidationError } from '../../errors/validation-error.ts';
import { openDatabase } from '../../open-database.ts';
import { type PruneDatabase, type PruneKind, type PruneScope, RUN_KINDS } from '../prune.ts';
import { prunePredicates } from '../prune-statements.ts';
import { PRUNE_TABLES_SQL, pruneStatements } from './prune-statements.ts';
import { STATE_SCHEMA_VERSION } from './schema.ts';

/**
 * A SQLite state file as `prune` sees it (docs/cli.md#prune). The file is opened as a run opens it (WAL, the busy
 * timeout), so that each batch waits its turn behind a run's commit and a run's commit behind a batch. A file of
 * another state schema is refused: the next run brings an older one up, a newer one is a newer webdata-etl's.
 */
export function sqlitePruneDatabase(path: string): PruneDatabase {
  if (!existsSync(path)) throw new ValidationError('Invalid state store', [{ path: 'state.path', message: `${path} does not exist` }]);
  const db = openDatabase(path);
  try {
    const tables = new Set(db.prepare(PRUNE_TABLES_SQL).pluck().all() as string[]);
    const named = prunePredicates('', { run: '', pipeline: '', before: '' });
    const kinds: PruneKind[] = [...RUN_KINDS, 'spend'].filter((kind) => tables.has(named[kind as PruneKind].table)) as PruneKind[];
    if (!tables.has('webdata_meta') || !tables.has('runs')) {
      throw new ValidationError('Invalid state store', [{ path: 'state.path', message: `${path} holds no webdata-etl run state (no webdata_meta or runs table)` }]);
    }
    const sql = pruneStatements(db, kinds);
    const version = Number(sql.version.get());
    if (version !== STATE_SCHEMA_VERSION) {
      throw new ValidationError('Invalid state store', [
        {
          path: 'state.path',
          message: `${path} holds state schema ${version}; this webdata-etl prunes schema ${STATE_SCHEMA_VERSION}: ${version < STATE_SCHEMA_VERSION ? 'run the pipeline once with it (the run brings the file up), then prune' : 'prune with the newer webdata-etl that wrote it'}`,
        },
      ]);
    }
    return sqliteDatabase(path, db, sql, kinds);
  } catch (error) {
    db.close();
    throw error;
  }
}

function sqliteDatabase(path: string, db: ReturnType<typeof openDatabase>, sql: ReturnType<typeof pruneStatements>, kinds: readonly PruneKind[]): PruneDatabase {
  const statement = (kind: PruneKind) => {
    const found = sql.kinds.get(kind);
    if (!found) throw new Error(`no ${kind} in ${path}`);
    return found;
  };
  const params = (scope: PruneScope) => ({ run: scope.runId ?? null, pipeline: scope.pipeline, before: scope.before?.toISOString() ?? null });
  const sizes = new Map<PruneKind, { bytes: number; rows: number }>();
  return {
    label: path,
    store: 'sqlite',
    runKinds: RUN_KINDS.filter((kind) => kinds.includes(kind)),
    pipelines: async () => sql.pipelines.all() as string[],
    runsOf: async (pipeline) => sql.runsOf.all(pipeline) as { runId: string; status: string }[],
    heldRuns: async () => new Set(sql.heldRuns.all() as string[]),
    hasAllowances: async () => sql.hasAllowances.get() !== undefined,
    count: async (kind, scope) => (kinds.includes(kind) ? Number(statement(kind).count.get(params(scope))) : 0),
    remove: async (kind, scope, limit) => (kinds.includes(kind) ? statement(kind).remove.run({ ...params(scope), limit }).changes : 0),
    bytes: async (kind, rows) => {
      if (!kinds.includes(kind)) return 0;
      let size = sizes.get(kind);
      if (!size) {
        const { bytesOf, rowsOf, table } = statement(kind);
        size = { bytes: Number(bytesOf.get(table)), rows: Number(rowsOf.get()) };
        sizes.set(kind, size);
      }
      return size.rows === 0 ? 0 : Math.round((size.bytes * Math.min(rows, size.rows)) / size.rows);
    },
    close: async () => {
      db.close();
    },
  };
}
