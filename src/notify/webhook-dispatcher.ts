import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type { buildConnector, Dispatcher } from 'undici';
import { loopbackLookup } from '../client/dispatcher.ts';
import { isLoopbackHost } from '../client/options.ts';
import { undici } from '../client/undici.ts';
import { anAddressOf, specialAddress } from './special-addresses.ts';

/** The code of a connection refused for its address: an attempt that meets it ends the delivery (docs/notifications.md). */
export const ADDRESS_REFUSED = 'EWEBHOOKADDRESS';

/**
 * The dispatcher a webhook is delivered through, which checks every address it connects to as it connects: a literal
 * address, a loopback name, and every address a name resolves to (the lookup that connects is the one that checks,
 * so a name that resolved to a public address when asked before and to a private one now — DNS rebinding — is
 * refused all the same). Special addresses (special-addresses.ts) are refused unless WEBDATA_ALLOWED_HOSTS (`allowed`)
 * lists the webhook's host or the address. Loopback is never proxied; otherwise HTTPS_PROXY / NO_PROXY are
 * honoured, and through a proxy the proxy resolves the name: its own address, the environment's choice, is not
 * checked, and what it connects to is its business (docs/notifications.md#where-a-webhook-may-point).
 */
export function webhookDispatcher(url: string, allowed: readonly string[] | undefined, lookup: LookupFunction = dnsLookup as LookupFunction): Dispatcher {
  const { Agent, EnvHttpProxyAgent, buildConnector: connector } = undici();
  const listed = new Set((allowed ?? []).map(bare));
  const proxies = proxyOrigins(process.env);
  const direct = connector({ lookup });
  const toLoopback = connector({ lookup: loopbackLookup });
  const checked = connector({ lookup: checkedLookup(listed, lookup) });
  const connect: buildConnector.connector = (options, callback) => {
    const host = bare(options.hostname);
    if (proxies.has(`${host}:${options.port || (options.protocol === 'https:' ? '443' : '80')}`)) return direct(options, callback);
    const kind = isLoopbackHost(host) && isIP(host) === 0 ? 'loopback' : specialAddress(host);
    if (kind !== undefined && !listed.has(host)) return callback(refusal(`${host} is ${anAddressOf(kind)}`), null);
    // localhost and *.localhost are this machine, whatever a resolver says (RFC 6761).
    if (isLoopbackHost(host) && isIP(host) === 0) return toLoopback(options, callback);
    // A literal address, or a name the operator listed: taken as it is.
    if (isIP(host) !== 0 || listed.has(host)) return direct(options, callback);
    return checked(options, callback);
  };
  return isLoopbackHost(new URL(url).hostname) ? new Agent({ connect }) : new EnvHttpProxyAgent({ connect });
}

/** A lookup that resolves every address of a name and refuses them all if any one is special and not listed. */
function checkedLookup(listed: ReadonlySet<string>, lookup: LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, found) => {
      if (error) return callback(error, []);
      const addresses = (Array.isArray(found) ? found : [{ address: found, family: isIP(found) }]) as LookupAddress[];
      for (const { address } of addresses) {
        const kind = listed.has(bare(address)) ? undefined : specialAddress(address);
        if (kind !== undefined) return callback(refusal(`${hostname} resolves to ${address}, ${anAddressOf(kind)}`), []);
      }
      const [first] = addresses;
      if (first === undefined) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      if (options.all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}

function refusal(what: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`refused: ${what}; a webhook is sent to such an address only when WEBDATA_ALLOWED_HOSTS lists its host`), { code: ADDRESS_REFUSED });
}

/** host:port of the proxies the environment names (undici's EnvHttpProxyAgent reads the same variables). */
function proxyOrigins(env: NodeJS.ProcessEnv): Set<string> {
  const origins = new Set<string>();
  for (const value of [env.http_proxy, env.HTTP_PROXY, env.https_proxy, env.HTTPS_PROXY]) {
    if (!value) continue;
    try {
      const url = new URL(value);
      origins.add(`${bare(url.hostname)}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`);
    } catch {
      // Not a URL: undici refuses it itself when the dispatcher is made.
    }
  }
  return origins;
}

const bare = (host: string) => host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
