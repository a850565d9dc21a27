import { postgresTimeouts } from './timeouts.ts';
import type { PostgresTarget } from './target.ts';

/**
 * Why a connection could not be made, in the user's terms, and what to check, when `error` is a failure to connect
 * (nothing was sent): a port where no server listens, a host name that does not resolve, no answer in time, no route,
 * a socket directory without the server's socket. Undefined for any other failure. `target` names the host, the port
 * and the setting that gave them.
 */
export function unreachableHint(error: unknown, target: PostgresTarget): string | undefined {
  const { code, syscall } = (error ?? {}) as { code?: unknown; syscall?: unknown };
  const message = error instanceof Error ? error.message : '';
  const { host } = target;
  const port = target.port.value;
  const inSetting = `in ${target.from}`;
  if (code === 'ENOENT' && syscall === 'connect') {
    return `no server's socket for port ${port} in the directory ${host}: start the server, or check the socket directory and port ${inSetting}`;
  }
  if (code === 'ECONNREFUSED') return `no server listens at ${host}, port ${port}: check the host and port ${inSetting}, or start the server`;
  if (code === 'ENOTFOUND') return `the host name ${host} is not known: check the host ${inSetting}`;
  if (code === 'EAI_AGAIN') return `the host name ${host} could not be looked up (DNS did not answer): check the host ${inSetting}, and the network`;
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return `there is no route to ${host}: check the host ${inSetting}, and the network`;
  if ((code === 'ETIMEDOUT' && syscall === 'connect') || /connection timeout|timeout exceeded when trying to connect/i.test(message)) {
    return `no answer from ${host}, port ${port} within ${postgresTimeouts().connect / 1000} s: check the host and port ${inSetting} (a firewall may drop the connection), or whether the server is up`;
  }
  return undefined;
}
