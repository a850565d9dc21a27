import { isPostgresDatabase } from '../analytics/reader.ts';
import { UsageError } from '../errors/usage-error.ts';
import { carriesPassword, isPostgresUrl } from '../postgres/target.ts';

/**
 * What `export` and `report` share: one database to read, and the filters `--query`, `--country` and `--table`
 * (the results table), with the same meaning in both.
 */
export const FILTER_OPTIONS = {
  query: { type: 'string' },
  country: { type: 'string' },
  table: { type: 'string' },
  schema: { type: 'string' },
  'state-schema': { type: 'string' },
  'database-url': { type: 'string' },
} as const;

/** How a command names the database it reads, for its help: a file or PostgreSQL. */
export const DATABASE_HELP = `<db> is a SQLite file, or PostgreSQL: a postgres://user@host/db URL (its password from PGPASSWORD or
~/.pgpass, never the command line), or postgres: alone for DATABASE_URL or libpq's variables (PGHOST, …).
  --database-url <url>   the PostgreSQL database, in place of <db>
  --schema <name>        PostgreSQL: the schema of the results table and its views (default public)
  --state-schema <name>  PostgreSQL: the schema of the run state (default webdata)`;

/** The filters given, as options for `exportReport` and `writeReport` (an absent one stays absent). */
export function filtersFrom(values: { query?: string | undefined; country?: string | undefined; table?: string | undefined; schema?: string | undefined; 'state-schema'?: string | undefined }) {
  return {
    ...(values.query !== undefined ? { query: values.query } : {}),
    ...(values.country !== undefined ? { country: values.country } : {}),
    ...(values.table ? { table: values.table } : {}),
    ...(values.schema ? { schema: values.schema } : {}),
    ...(values['state-schema'] ? { stateSchema: values['state-schema'] } : {}),
  };
}

/** The one database the command reads, or a usage error showing how to call it. */
export function oneDatabase(positionals: string[], command: string, example: string, databaseUrl?: string): string {
  if (databaseUrl !== undefined) {
    if (positionals.length > 0) throw new UsageError(`${command} takes one database: <db> or --database-url, not both`);
    if (!isPostgresDatabase(databaseUrl)) throw new UsageError(`--database-url must be a PostgreSQL URL such as postgres://user@host:5432/dbname (or postgres: for DATABASE_URL)`);
    positionals = [databaseUrl];
  }
  const [database] = positionals;
  if (!database || positionals.length > 1) throw new UsageError(`${command} takes one database: ${example}`);
  checkDatabaseArgument(database);
  return database;
}

/**
 * A PostgreSQL URL on the command line: parsable, and without a password, in its user part or as ?password= (the
 * process list shows arguments).
 */
export function checkDatabaseArgument(database: string): void {
  if (!isPostgresDatabase(database) || /^postgres(ql)?:$/i.test(database)) return;
  // Shown without its user part and its parameters, either of which may hold a password.
  if (!URL.canParse(database)) throw new UsageError(`${database.split(/[?#]/)[0]?.split('@').at(-1)} is not a PostgreSQL URL such as postgres://user@host:5432/dbname`);
  if (carriesPassword(database)) {
    throw new UsageError('a database URL on the command line must not carry a password (the process list shows it): set PGPASSWORD or use ~/.pgpass, or give postgres: to read DATABASE_URL');
  }
}

/**
 * Where the run state goes, for `run` and `runs`: `--state`, else WEBDATA_STATE_URL — a PostgreSQL URL, with a
 * password only from the environment (a flag shows in the process list).
 */
export function stateUrlFrom(flag: string | undefined, env: string | undefined): string | undefined {
  const url = flag ?? (env || undefined);
  if (url === undefined) return undefined;
  const from = flag === undefined ? 'WEBDATA_STATE_URL' : '--state';
  if (!isPostgresUrl(url) || !URL.canParse(url)) throw new UsageError(`${from} must be a PostgreSQL URL such as postgres://user@host:5432/dbname`);
  if (flag !== undefined && carriesPassword(url)) {
    throw new UsageError('--state must not carry a password (the command line shows in the process list): set PGPASSWORD, use ~/.pgpass, or put the URL in WEBDATA_STATE_URL');
  }
  return url;
}
