import { createRequire } from 'node:module';

/** What node-postgres' parse of a connection string says of where it connects (the rest of its answer is not read). */
export interface DriverView {
  /** The host: the last non-empty `?host=`, else the URL's own, percent-decoded; '' when neither names one. */
  readonly host: string;
  /** The port: the last non-empty `?port=`, else the URL's own; '' when neither gives one. */
  readonly port: string;
}

type Parse = (connectionString: string) => Record<string, unknown> & { host?: unknown; port?: unknown };
let parse: Parse | undefined;

/**
 * Where node-postgres will connect for `connectionString`, decided by its own parse (pg-connection-string), the very
 * copy `pg` requires: it is resolved from pg's directory rather than declared as a dependency of ours, so that what is
 * checked before connecting is what is connected to, whatever copy npm installs or hoists. A reading of our own
 * differed: `new URL().searchParams.get('host')` reads the first `?host=`, the driver takes the last, so a second
 * one sent the password to a host nobody checked. An empty value falls back as node-postgres' own does (then to
 * PGHOST, PGPORT and its defaults: `postgresTarget`).
 *
 * The parse reads the files a URL names as `sslcert`, `sslkey` and `sslrootcert`, as the driver does when it
 * connects; one that cannot be read throws here rather than there.
 */
export function driverView(connectionString: string): DriverView {
  parse ??= loadParse();
  const config = parse(connectionString);
  return { host: typeof config.host === 'string' ? config.host : '', port: typeof config.port === 'string' ? config.port : '' };
}

/**
 * The whole of node-postgres' parse of `connectionString`: what its Pool would read from the URL (host, port, user,
 * database, ssl, `options`, and any other parameter as given), for a pool built from it with our own settings on top.
 */
export function driverConfig(connectionString: string): Record<string, unknown> {
  parse ??= loadParse();
  return parse(connectionString);
}

function loadParse(): Parse {
  const pg = createRequire(import.meta.url).resolve('pg');
  return (createRequire(pg)('pg-connection-string') as { parse: Parse }).parse;
}
