import { ValidationError } from '../errors/validation-error.ts';
import { socketDirectoryRisk } from './socket-directory.ts';
import type { PostgresTarget } from './target.ts';

/** Loopback, reached without leaving the machine: `localhost`, 127.0.0.0/8, ::1. */
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|::1)$/i;

/**
 * What is refused before a connection is opened, exit 2, each naming what to set: no database named at all (guessing
 * node-postgres' localhost:5432 made a missing setting read as a server that is down), a port that is none (node-postgres
 * never answers for one), and a host the password must not go to.
 *
 * The password — PGPASSWORD, or a wildcard line of ~/.pgpass — goes to whatever host is connected to, and a pipeline
 * file (shared, committed, written by someone else) can name any host. So a host named by the pipeline (a sink's url,
 * state.url) must be loopback, a socket directory of the user's own (`checkSocketDirectory`), or listed in
 * WEBDATA_ALLOWED_DB_HOSTS (comma-separated). The host is the one node-postgres connects to (`target.ts` asks its own
 * parse), never a reading of our own. A host the user names (DATABASE_URL, WEBDATA_STATE_URL, PGHOST, the command line) is theirs to choose — unless
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
  const listed = (env.WEBDATA_ALLOWED_DB_HOSTS ?? '')
    .split(',')
    .map((name) => name.trim().replace(/^\[(.*)\]$/, '$1'))
    .filter(Boolean);
  if (host.startsWith('/')) return checkSocketDirectory(target, listed);
  if (LOOPBACK.test(host)) return;
  const names = listed.map((name) => name.toLowerCase());
  if (names.length > 0 && !names.includes(host)) {
    throw new ValidationError('The database host is not allowed', [
      {
        path: target.namedBy ?? 'WEBDATA_ALLOWED_DB_HOSTS',
        message: `${target.host} is not among WEBDATA_ALLOWED_DB_HOSTS (${names.join(', ')}): a connection, and the password with it, goes only to those hosts and loopback; check where ${target.label} comes from, or add the host`,
      },
    ]);
  }
  if (names.length === 0 && target.namedBy !== undefined) {
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

/**
 * A socket directory is local, but whoever can write to it can listen there in the server's place: one a pipeline
 * file names is taken only when it is the user's own or root's and private (`socketDirectoryRisk`), or listed in
 * WEBDATA_ALLOWED_DB_HOSTS (Debian's /var/run/postgresql belongs to the postgres user). One the user names is theirs.
 */
function checkSocketDirectory(target: PostgresTarget, listed: readonly string[]): void {
  if (target.namedBy === undefined) return;
  const dir = target.host.replace(/(.)\/+$/, '$1');
  if (listed.some((name) => name.replace(/(.)\/+$/, '$1') === dir)) return;
  const risk = socketDirectoryRisk(target.host);
  if (risk === undefined) return;
  throw new ValidationError('The database socket directory is not allowed', [
    {
      path: target.namedBy,
      message:
        `the socket directory ${target.host} (the host of ${target.label}) ${risk}: whoever can write to it can listen there in the server's place and take the password. ` +
        `Use a directory of your own that only you can write to, list it in WEBDATA_ALLOWED_DB_HOSTS if you trust it, or leave the url out of the pipeline and set PGHOST or DATABASE_URL`,
    },
  ]);
}
