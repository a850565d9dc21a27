import { ValidationError, type ValidationIssue } from '../errors/validation-error.ts';
import type { Pipeline } from '../config/define.ts';
import { allowedHosts, hostRefused } from '../client/allowed-hosts.ts';
import { type ApiKey, readApiKeys, unknownKeyLabels } from '../client/api-keys.ts';
import { baseUrlSchema } from '../client/options.ts';

/** Where the key goes, and who decided: shown before the first request and kept in the summary. */
export interface Destination {
  /** `https://api.example.com`: the scheme, host and port requests go to. */
  origin: string;
  /** Who chose the address: `--base-url`, `WEBDATA_BASE_URL`, the pipeline file, … */
  from: string;
  /** What is sent with each request: `key from WEBDATA_API_KEY`, `token from WEBDATA_TOKEN`, … */
  credentials: string;
}

export interface DestinationInput {
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  token?: string | undefined;
  /** Who set `baseUrl` and the key or token given in code (a flag of the command line, `--simulator`, …). */
  sources?: { baseUrl?: string | undefined; credentials?: string | undefined } | undefined;
  /** The pipeline's file, when it came from one: a JSON config or module decides the address when nothing else does. */
  pipelineFile?: string | undefined;
}

/**
 * The API address and credentials of a run, with where each came from (flags, then the environment, then the
 * pipeline). A pipeline file can name any address: WEBDATA_ALLOWED_HOSTS (comma-separated host names), when set,
 * is the list of hosts the key may be sent to, checked before any request.
 */
export function resolveDestination(pipeline: Pipeline, input: DestinationInput, env: Readonly<Record<string, string | undefined>>) {
  const [baseUrl, from] =
    input.baseUrl !== undefined
      ? [input.baseUrl, input.sources?.baseUrl ?? 'run() options']
      : env.WEBDATA_BASE_URL
        ? [env.WEBDATA_BASE_URL, 'WEBDATA_BASE_URL']
        : [pipeline.api.baseUrl, input.pipelineFile ?? `pipeline "${pipeline.name}" (api.baseUrl)`];
  // Every problem at once: a missing address and a missing key are two variables to set, not two runs to find them.
  const issues: ValidationIssue[] = [];
  const given = input.apiKey !== undefined || input.token !== undefined;
  // The environment's keys (docs/pipelines.md#a-pool-of-keys): one, or a pool; a key given in code is the one key.
  let pool: ReturnType<typeof readApiKeys>;
  try {
    pool = given ? undefined : readApiKeys(env);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    issues.push(...error.issues);
  }
  const keys: readonly ApiKey[] = input.apiKey !== undefined ? [{ label: 'default', key: input.apiKey }] : (pool?.keys ?? []);
  const token = input.token ?? (given || pool ? undefined : env.WEBDATA_TOKEN);
  if (!baseUrl) issues.push({ path: 'api.baseUrl', message: 'set WEBDATA_BASE_URL (or --base-url, or api.baseUrl), e.g. "https://api.example.com/api/v1"' });
  // Who set the environment's keys, when a caller did (`--simulator-keys`: the built-in simulator's pool).
  const said = given ? (input.sources?.credentials ?? 'run() options') : input.sources?.credentials;
  // A key's settings name a key the environment holds: a label mistyped would leave that key at the pipeline's rate.
  if (keys.length > 0) issues.push(...unknownKeyLabels(pipeline.keys, keys.map((key) => key.label), said ?? pool?.from ?? 'the run'));
  if (keys.length === 0 && !token && issues.every((issue) => !issue.path.startsWith('WEBDATA_API_KEY'))) {
    issues.push({ path: 'apiKey', message: 'no credentials: set WEBDATA_API_KEY (or WEBDATA_API_KEYS for a pool of keys, or WEBDATA_TOKEN for a JWT)' });
  }
  // Its form too (the client checks it again): a wrong address is said with the missing key, not after it.
  const form = baseUrl ? baseUrlSchema.safeParse(baseUrl) : undefined;
  if (form && !form.success) issues.push(...form.error.issues.map((issue) => ({ path: 'api.baseUrl', message: issue.message })));
  const origin = baseUrl ? originOf(baseUrl) : undefined;
  const refused = baseUrl && origin ? refusedHost(origin, baseUrl, env.WEBDATA_ALLOWED_HOSTS) : undefined;
  if (refused) issues.push(refused);
  if (!baseUrl || !origin || issues.length > 0) {
    throw new ValidationError(baseUrl ? `Pipeline "${pipeline.name}" cannot reach the API` : `Pipeline "${pipeline.name}" has no API address`, issues);
  }
  const credentials =
    keys.length > 1
      ? `${keys.length} keys from ${said ?? pool?.from} (${keys.map((key) => key.label).join(', ')})`
      : keys.length === 1
        ? `key from ${said ?? pool?.from ?? 'WEBDATA_API_KEY'}`
        : `token from ${said ?? 'WEBDATA_TOKEN'}`;
  return { baseUrl, keys, token, destination: { origin, from, credentials } satisfies Destination };
}

/** `key from WEBDATA_API_KEY → https://api.example.com (from pipelines/x.json)` */
export function describeDestination(destination: Destination): string {
  return `${destination.credentials} → ${destination.origin} (from ${destination.from})`;
}

function originOf(baseUrl: string): string {
  try {
    return new URL(baseUrl.trim()).origin;
  } catch {
    // Not a URL: the client's validation says what is wrong with it.
    return baseUrl;
  }
}

/** The allow-list's refusal of the API's host, when WEBDATA_ALLOWED_HOSTS is set and does not list it. */
function refusedHost(origin: string, baseUrl: string, list: string | undefined): ValidationIssue | undefined {
  const allowed = allowedHosts(list);
  if (allowed === undefined || hostRefused(baseUrl, allowed) === undefined) return undefined;
  return {
    path: 'api.baseUrl',
    message: `${origin} is not among WEBDATA_ALLOWED_HOSTS (${allowed.join(', ')}): the key is sent only to those hosts; check where the address comes from, or add the host`,
  };
}
