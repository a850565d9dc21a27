import { keyFingerprint } from '../client/api-keys.ts';
import { type Client, createClient } from '../client/client.ts';
import type { Pipeline } from '../config/define.ts';
import { type Destination, resolveDestination } from './destination.ts';
import type { KeyIdentities } from './remembered-limits.ts';
import type { RunEvent, RunOptions } from './run-types.ts';

/**
 * The run's client and where it sends the key: the one given to run() (its owner closes it), or one built from the
 * options, the environment and the pipeline, whose warnings (a server echoing the key) become run events, once each;
 * and the credentials it sends, which nothing else the run writes may hold; and its keys as the state store may know
 * them (`identities`: none for a token, or a client given to run(), whose key is its own).
 */
export function clientForRun(
  pipeline: Pipeline,
  options: RunOptions,
  emit: (event: RunEvent) => void,
): { client: Client; clients: ReadonlyMap<string, Client>; destination: Destination; owned: boolean; secrets: (string | undefined)[]; identities: KeyIdentities | undefined } {
  if (options.client) {
    const destination = { origin: new URL(options.client.baseUrl).origin, from: 'the client given to run()', credentials: 'the client’s own' };
    return { client: options.client, clients: new Map([['default', options.client]]), destination, owned: false, secrets: [options.apiKey, options.token], identities: undefined };
  }
  const { baseUrl, keys, token, destination } = resolveDestination(pipeline, options, options.env ?? process.env);
  const warned = new Set<string>();
  const every = keys.map(({ key }) => key);
  const made = (credential: { apiKey: string } | { token: string }) =>
    createClient({
      baseUrl,
      // Once per run: a server that echoes the key does so in every answer.
      onWarning: (message) => {
        if (warned.has(message)) return;
        warned.add(message);
        emit({ type: 'warning', message });
      },
      ...credential,
      // A pool's keys all go to one server: an answer to one key may echo another.
      alsoRedact: every,
      ...(pipeline.api.timeoutMs ? { timeoutMs: pipeline.api.timeoutMs } : {}),
      ...(pipeline.api.userAgent ? { userAgent: pipeline.api.userAgent } : {}),
      ...(pipeline.api.extraCountries ? { extraCountries: pipeline.api.extraCountries } : {}),
      ...(pipeline.api.extraLangs ? { extraLangs: pipeline.api.extraLangs } : {}),
    });
  // One client per key (docs/pipelines.md#a-pool-of-keys), the key in its closure alone; a token is one credential.
  const clients = new Map<string, Client>(keys.length > 0 ? keys.map(({ label, key }) => [label, made({ apiKey: key })]) : [['default', made({ token: token as string })]]);
  // What the run must never write anywhere else: redacted from what it sends its webhooks, stores and prints.
  // A key is known to a database only by its fingerprint under the database's secret (docs/security.md#where-the-key-goes).
  const api = new URL(baseUrl);
  const identities: KeyIdentities | undefined =
    keys.length === 0 ? undefined : { api: `${api.origin}${api.pathname}`, fingerprints: (secret) => new Map(keys.map(({ label, key }) => [label, keyFingerprint(key, secret)])) };
  return { client: clients.values().next().value as Client, clients, destination, owned: true, secrets: [...every, token], identities };
}
