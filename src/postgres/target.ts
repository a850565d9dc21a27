import { z } from 'zod';

/**
 * Where a PostgreSQL connection goes, as every PostgreSQL tool finds it: a `postgres://` URL, else `DATABASE_URL`,
 * else libpq's own variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE), which node-postgres reads
 * itself. A URL written in a pipeline or config file carries no password (files get shared and committed, like an
 * API key): the password comes from PGPASSWORD, DATABASE_URL or ~/.pgpass.
 */
export interface PostgresTarget {
  /** For node-postgres; undefined when libpq's variables say it all. */
  readonly connectionString: string | undefined;
  /** Which database this is: the same label means the same server and database, so writes can share a transaction. */
  readonly database: string;
  /** The URL without its password, for messages and summaries. */
  readonly label: string;
}

const POSTGRES_URL = /^postgres(ql)?:\/\//i;

/** A schema, table or other name, safe to quote: lower case, as unquoted names fold, at most 63 bytes. */
export const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
export const postgresNameSchema = z.string().regex(IDENTIFIER, { error: 'must be a PostgreSQL name in lower case: letters a-z, digits and _, not starting with a digit, at most 63' });

/** A postgres:// URL as written in a file: parsable, and without a password. */
export const postgresUrlSchema = z
  .string()
  .refine((url) => POSTGRES_URL.test(url) && URL.canParse(url), { error: 'must be a URL such as "postgres://user@host:5432/dbname"' })
  .refine((url) => !URL.canParse(url) || new URL(url).password === '', {
    error: 'must not carry a password (a file is shared and committed): set PGPASSWORD, or DATABASE_URL in the environment, or use ~/.pgpass',
  });

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
 * Resolves a connection target: `url` (from a file or the command line), else DATABASE_URL, else libpq's variables.
 * `env` is where those are read (the process's, by default).
 */
export function postgresTarget(url: string | undefined, env: Readonly<Record<string, string | undefined>> = process.env): PostgresTarget {
  const connectionString = url ?? (env.DATABASE_URL || undefined);
  const parsed = connectionString && URL.canParse(connectionString) ? new URL(connectionString) : undefined;
  const host = parsed?.searchParams.get('host') || decodeURIComponent(parsed?.hostname ?? '') || env.PGHOST || 'localhost';
  const port = parsed?.port || env.PGPORT || '5432';
  const user = decodeURIComponent(parsed?.username ?? '') || env.PGUSER || env.USER || 'postgres';
  const name = decodeURIComponent(parsed?.pathname.slice(1) ?? '') || env.PGDATABASE || user;
  const database = `postgres://${host.includes('/') ? encodeURIComponent(host) : host}:${port}/${encodeURIComponent(name)}`;
  return { connectionString, database, label: connectionString ? redactPostgresUrl(connectionString) : `${database} (from PGHOST/PGDATABASE)` };
}
