import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { type DriverView, driverView } from './driver-parse.ts';

/**
 * Where a PostgreSQL connection goes, as every PostgreSQL tool finds it: a `postgres://` URL, else `DATABASE_URL`,
 * else libpq's own variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE), which node-postgres reads
 * itself. A URL written in a pipeline or config file carries no password (files get shared and committed, like an
 * API key): the password comes from PGPASSWORD, DATABASE_URL or ~/.pgpass. What is refused before connecting (no
 * database named, a port that is none, a host the password must not go to) is in `before-connect.ts`.
 */
export interface PostgresTarget {
  /** For node-postgres; undefined when libpq's variables say it all. */
  readonly connectionString: string | undefined;
  /** Which database this is: the same label means the same server and database, so writes can share a transaction. */
  readonly database: string;
  /** The URL without its password, for messages and summaries. */
  readonly label: string;
  /** Where node-postgres connects: a host name, an address, or a socket directory (a path). */
  readonly host: string;
  /** The port as given (checked before connecting), and where it was given: the URL's `port`, or `PGPORT`. */
  readonly port: { readonly value: string; readonly from: 'port' | 'PGPORT' | 'default' };
  /** What in the pipeline named the host (`state.url`, …), when a file did rather than the user: see `before-connect.ts`. */
  readonly namedBy: string | undefined;
  /** Nothing names a database: no URL, no DATABASE_URL, and none of libpq's variables that say where. */
  readonly unnamed: boolean;
  /** What named this connection, for messages that say what to check: `postgres.url`, `--state`, `DATABASE_URL`, `PGHOST, PGPORT`, … */
  readonly from: string;
  /**
   * The PostgreSQL sink (`schema.table`) whose database keeps the run state too, when the pipeline names no state
   * store of its own (`stateDatabase`): messages about the state store name the sink, which is what the user wrote.
   */
  readonly sink?: string;
}

/** How messages name the state store in `target`: a sink's database, when that is where it is kept, by the sink. */
export function stateStoreWhere(target: PostgresTarget): string {
  return target.sink === undefined ? `the state store ${target.label}` : `the PostgreSQL sink's database ${target.label} (table ${target.sink}; the run state is kept there too)`;
}

const POSTGRES_URL = /^postgres(ql)?:\/\//i;

/** libpq's variables that say which server and database (node-postgres reads these; PGPASSWORD and PGSSLMODE say how). */
const WHERE_VARIABLES = ['PGHOST', 'PGPORT', 'PGUSER', 'PGDATABASE'] as const;

/** A schema, table or other name, safe to quote: lower case, as unquoted names fold, at most 63 bytes. */
export const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
export const postgresNameSchema = z.string().regex(IDENTIFIER, { error: 'must be a PostgreSQL name in lower case: letters a-z, digits and _, not starting with a digit, at most 63' });

/**
 * Whether a URL carries a password: in its user part, or as a parameter (`?password=`, which node-postgres reads as
 * the password and which a process list or a committed file shows all the same).
 */
export function carriesPassword(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const parsed = new URL(url);
  return parsed.password !== '' || [...parsed.searchParams.keys()].some((key) => /password/i.test(key));
}

/**
 * What is wrong with a URL's `?host=` and `?port=` for a file to give: each at most once and not empty. node-postgres
 * takes the last non-empty one, so a URL that repeats one, or leaves one empty, reads one way and connects another
 * (`?host=127.0.0.1&host=elsewhere`, `?host=&host=elsewhere`): a file, written by someone else, must say it plainly.
 */
export function ambiguousParameters(url: string): string[] {
  if (!URL.canParse(url)) return [];
  const params = new URL(url).searchParams;
  return (['host', 'port'] as const).flatMap((name) => {
    const values = params.getAll(name);
    if (values.length === 0 || (values.length === 1 && values[0] !== '')) return [];
    const empty = values.filter((value) => value === '').length;
    const what = values.length === 1 ? 'it is empty' : `it is given ${values.length} times${empty > 0 ? `, ${empty} of them empty` : ''}`;
    return [`?${name}= must be given at most once and not empty, and ${what}: node-postgres takes the last non-empty one, so the URL would not say where it connects; give it once, or leave it out for the URL's own ${name}`];
  });
}

/** A postgres:// URL as written in a file: parsable, without a password, and saying plainly where it connects. */
export const postgresUrlSchema = z
  .string()
  .refine((url) => POSTGRES_URL.test(url) && URL.canParse(url), { error: 'must be a URL such as "postgres://user@host:5432/dbname"' })
  .refine((url) => !carriesPassword(url), {
    error: 'must not carry a password (in its user part or as ?password=; a file is shared and committed): set PGPASSWORD, or DATABASE_URL in the environment, or use ~/.pgpass',
  })
  .superRefine((url, context) => {
    for (const message of ambiguousParameters(url)) context.addIssue({ code: 'custom', message });
  });

/** A URL's part, percent-decoded as node-postgres decodes it; one that does not decode (`%zz`) as it is. */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

export function isPostgresUrl(value: string): boolean {
  return POSTGRES_URL.test(value);
}

/** The URL as it may be shown: the password, and any in the query string, replaced. */
export function redactPostgresUrl(url: string): string {
  if (!URL.canParse(url)) return 'postgres://(unparsable URL)';
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  for (const key of [...parsed.searchParams.keys()]) if (/pass|secret|key/i.test(key)) parsed.searchParams.set(key, '***');
  return parsed.toString();
}

/**
 * Resolves a connection target: `url` (from a file or the command line), else DATABASE_URL, else libpq's variables,
 * the host and port as node-postgres takes them (its own parse, `driver-parse.ts`: the last `?host=` and `?port=`
 * before the URL's own, then PGHOST and PGPORT). `env` is where those are read (the process's, by default);
 * `namedBy` says what in the pipeline `url` comes from, when a file wrote it; `from`, what else gave it (`--state`).
 */
export function postgresTarget(
  url: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
  options: { namedBy?: string; from?: string } = {},
): PostgresTarget {
  const connectionString = url ?? (env.DATABASE_URL || undefined);
  const parsed = connectionString && URL.canParse(connectionString) ? new URL(connectionString) : undefined;
  const driver = connectionString === undefined ? { host: '', port: '' } : viewOf(connectionString, options.namedBy ?? (url === undefined ? 'DATABASE_URL' : 'url'));
  const port = driver.port ? { value: driver.port, from: 'port' as const } : env.PGPORT ? { value: env.PGPORT, from: 'PGPORT' as const } : { value: '5432', from: 'default' as const };
  // The database's identity, spelled as it always was (sinks' checkpoints are stored under it): a host the URL
  // itself names keeps its brackets and encoding; one from ?host= is as given. The port is the one connected to: read
  // from the URL's own alone, a ?port= made two servers one database, and a sink's rows went to the other's.
  const ownHost = decoded(parsed?.hostname ?? '');
  const spelled = driver.host !== '' && driver.host === ownHost.replace(/^\[(.*)\]$/, '$1') ? ownHost : driver.host;
  const host = spelled || env.PGHOST || 'localhost';
  const user = decoded(parsed?.username ?? '') || env.PGUSER || env.USER || 'postgres';
  const name = decoded(parsed?.pathname.slice(1) ?? '') || env.PGDATABASE || user;
  const database = `postgres://${host.includes('/') ? encodeURIComponent(host) : host}:${port.value}/${encodeURIComponent(name)}`;
  // Credit only the variables that are set: the rest are node-postgres' own defaults.
  const set = WHERE_VARIABLES.filter((variable) => env[variable]);
  return {
    connectionString,
    database,
    label: connectionString ? redactPostgresUrl(connectionString) : `${database} (from ${set.join(', ') || 'no variable'})`,
    host: driver.host || env.PGHOST || 'localhost',
    port,
    namedBy: url !== undefined && driver.host !== '' ? options.namedBy : undefined,
    unnamed: connectionString === undefined && set.length === 0,
    from: url !== undefined ? (options.namedBy ?? options.from ?? 'the URL') : connectionString !== undefined ? 'DATABASE_URL' : set.join(', ') || 'PGHOST and PGPORT',
  };
}

/** The driver's view of a connection string; one it cannot parse (or whose certificate files it cannot read) refused, exit 2. */
function viewOf(connectionString: string, field: string): DriverView {
  try {
    return driverView(connectionString);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ValidationError('Invalid PostgreSQL connection', [{ path: field, message: `node-postgres cannot use ${redactPostgresUrl(connectionString)}: ${reason}` }]);
  }
}
