import { ValidationError } from '../errors/validation-error.ts';
import type { PostgresTarget } from './target.ts';

/** Loopback, reached without leaving the machine: `localhost`, 127.0.0.0/8, ::1. A socket directory (a path) is local too. */
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|::1)$/i;

function isLocal(host: string): boolean {
  return host.startsWith('/') || LOOPBACK.test(host);
}

/**
 * What is refused before a connection is opened, exit 2, each naming what to set: no database named at all (guessing
 * node-postgres' localhost:5432 made a missing setting read as a server that is down), a port that is none (node-postgres
 * never answers for one), and a host the password must not go to.
 *
 * The password — PGPASSWORD, or a wildcard line of ~/.pgpass — goes to whatever host is connected to, and a pipeline
 * file (shared, committed, written by someone else) can name any host. So a host named by the pipeline (a sink's url,
 * state.url) must be loopback, a socket directory, or listed in WEBDATA_ALLOWED_DB_HOSTS (comma-separated). A host the
 * user names (DATABASE_URL, WEBDATA_STATE_URL, PGHOST, the command line) is theirs to choose — unless
 * WEBDATA_ALLOWED_DB_HOSTS is set: then it is the list of every host a connection may go to, loopback aside.
 */
export function checkConnection(target: PostgresTarget, env: Readonly<Record<string, string | undefined>> = process.env): void {
  if (target.unnamed) {
    throw new ValidationError('No PostgreSQL database', [
      {
        path: 'DATABASE_URL',
        message:
          'no PostgreSQL database is named: set DATABASE_URL (postgres://user@host:5432/dbname), or PGHOST and PGDATABASE (with PGUSER, PGPORT as needed), ' +
          "or give a URL (a sink's url, state.url, --state); see docs/postgres.md, \"The connection\"",
      },
    ]);
  }
  const { value, from } = target.port;
  if (!/^\d{1,5}$/.test(value) || Number(value) < 1 || Number(value) > 65535) {
    const where = from === 'PGPORT' ? 'PGPORT' : 'port';
    throw new ValidationError('Invalid PostgreSQL connection', [
      { path: where, message: `must be a port, a whole number from 1 to 65535; it is ${JSON.stringify(value.slice(0, 20))}${where === 'port' ? ` in ${target.label}` : ''}` },
    ]);
  }
  const host = target.host.toLowerCase();
  if (isLocal(host)) return;
  const listed = (env.WEBDATA_ALLOWED_DB_HOSTS ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1'))
    .filter(Boolean);
  if (listed.length > 0 && !listed.includes(host)) {
    throw new ValidationError('The database host is not allowed', [
      {
        path: target.namedBy ?? 'WEBDATA_ALLOWED_DB_HOSTS',
        message: `${target.host} is not among WEBDATA_ALLOWED_DB_HOSTS (${listed.join(', ')}): a connection, and the password with it, goes only to those hosts and loopback; check where ${target.label} comes from, or add the host`,
      },
    ]);
  }
  if (listed.length === 0 && target.namedBy !== undefined) {
    throw new ValidationError('The database host is not allowed', [
      {
        path: target.namedBy,
        message:
          `${target.host} is named by the pipeline, and a host a pipeline file names must be loopback or listed in WEBDATA_ALLOWED_DB_HOSTS: ` +
          `the password (PGPASSWORD, ~/.pgpass) would go to it. If it is your database, set WEBDATA_ALLOWED_DB_HOSTS=${target.host} (comma-separated), or leave the url out of the pipeline and set DATABASE_URL`,
      },
    ]);
  }
}
