import { isPostgresDatabase } from '../analytics/reader.ts';
import { loadPipeline } from '../config/load-pipeline.ts';
import { UsageError } from '../errors/usage-error.ts';
import type { PostgresTarget } from '../postgres/target.ts';
import type { Retention } from '../state/retention.ts';
import { stateDatabase, statePath } from '../run/outputs.ts';
import { checkDatabaseArgument, oneDatabase, stateUrlFrom } from './database-filters.ts';

/** The flags of a command that reads a state database (`runs`, `spend`). */
export interface StateFlags {
  state?: string | undefined;
  'state-schema'?: string | undefined;
  'database-url'?: string | undefined;
}

/**
 * The state database a command reads: a pipeline file's state store (its SQLite file, or PostgreSQL by `--state`,
 * WEBDATA_STATE_URL or `state.url`, in its `state.schema`), a SQLite file (`.sqlite`, `.sqlite3`, `.db`), or a
 * PostgreSQL URL, given as the one argument or by `--database-url`. `pipeline`: the file's pipeline, when a file was
 * given, and its `retention` (`prune`).
 */
export async function stateDatabaseArgument(
  command: string,
  positionals: string[],
  values: StateFlags,
): Promise<{ database: string | PostgresTarget; stateSchema: string | undefined; pipeline: string | undefined; retention?: Retention | undefined }> {
  const [file] = values['database-url'] === undefined ? positionals : [oneDatabase(positionals, command, `webdata-etl ${command} --database-url postgres://…`, values['database-url'])];
  if (!file || positionals.length > 1) throw new UsageError(`${command} takes one pipeline file or state database: webdata-etl ${command} pipelines/rank-tracking.ts`);
  checkDatabaseArgument(file);
  const stateSchema = values['state-schema'];
  if (isPostgresDatabase(file) || /\.(sqlite|sqlite3|db)$/i.test(file)) return { database: file, stateSchema, pipeline: undefined };
  const loaded = await loadPipeline(file);
  const database = stateDatabase(loaded, stateUrlFrom(values.state, process.env.WEBDATA_STATE_URL)) ?? statePath(loaded);
  return { database, stateSchema: stateSchema ?? loaded.state.schema, pipeline: loaded.name, retention: loaded.retention };
}
