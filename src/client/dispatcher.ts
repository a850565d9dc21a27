import type { Dispatcher } from 'undici';
import { isLoopbackHost } from './options.ts';
import { undici } from './undici.ts';

/**
 * The dispatcher for requests to `url` (the API's, a webhook's). Loopback traffic never goes through a proxy;
 * everything else honours HTTPS_PROXY / NO_PROXY. `localhost` and `*.localhost` are connected to the loopback address
 * without asking any resolver (RFC 6761): plain http is allowed to them only because they are this machine, which a
 * hosts file or a DNS answer must not be able to change.
 */
export function defaultDispatcher(url: string): Dispatcher {
  const { Agent, EnvHttpProxyAgent } = undici();
  return isLoopbackHost(new URL(url).hostname) ? new Agent({ connect: { lookup: loopbackLookup } }) : new EnvHttpProxyAgent();
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | { address: string; family: number }[], family?: number) => void;

export function loopbackLookup(_hostname: string, options: { family?: number | string; all?: boolean }, callback: LookupCallback): void {
  const family = options.family === 6 || options.family === 'IPv6' ? 6 : 4;
  const address = family === 6 ? '::1' : '127.0.0.1';
  if (options.all) callback(null, [{ address, family }]);
  else callback(null, address, family);
}
