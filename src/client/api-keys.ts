import { createHmac } from 'node:crypto';
import { statSync } from 'node:fs';
import { ValidationError, type ValidationIssue } from '../errors/validation-error.ts';
import { readInputFile } from '../input-file.ts';

/** One API key of a pool, by the label it is known by everywhere (summaries, metrics, the state store). */
export interface ApiKey {
  readonly label: string;
  /** The `x-api-key` value. Lives only here and in the client made for it; never a property anything else shows. */
  readonly key: string;
}

/** The keys a run may send, and which variable they came from (for the run's first line and its messages). */
export interface ApiKeys {
  readonly keys: readonly ApiKey[];
  readonly from: 'WEBDATA_API_KEYS' | 'WEBDATA_API_KEYS_FILE' | 'WEBDATA_API_KEY';
}

/** A label: what a key is called in summaries, metrics and the state store (never the key). */
export const KEY_LABEL = /^[a-z0-9_-]{1,32}$/;
/** The label of WEBDATA_API_KEY's key alone. */
export const DEFAULT_LABEL = 'default';
/** More keys than this in one pool is a mistake (a file of something else), not a plan. */
export const MAX_KEYS = 64;
/** A keys file this large is not a keys file. */
const MAX_KEYS_FILE_BYTES = 64 * 1024;
/** What HTTP allows in a header value: a key pasted with an invisible character is refused, never sent. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]+$/;

/**
 * The API keys the environment holds (docs/pipelines.md#a-pool-of-keys), or undefined when it holds none:
 * `WEBDATA_API_KEYS` (several, comma- or newline-separated, each `label=key` or a bare key), or `WEBDATA_API_KEYS_FILE`
 * (a file of the same, readable by its owner only, as ssh wants a private key), or `WEBDATA_API_KEY` alone (labelled
 * `default`). An empty variable counts as unset; two of them set at once is refused, as is `WEBDATA_TOKEN` beside a
 * pool (a token is one credential). Every problem is said at once, naming the variable and the entry's label or
 * position — never a key.
 */
export function readApiKeys(env: Readonly<Record<string, string | undefined>>): ApiKeys | undefined {
  const set = (['WEBDATA_API_KEYS', 'WEBDATA_API_KEYS_FILE', 'WEBDATA_API_KEY'] as const).filter((name) => (env[name] ?? '').trim() !== '');
  if (set.length === 0) return undefined;
  if (set.length > 1) {
    throw new ValidationError('Conflicting API keys', [
      { path: set.join(', '), message: `set one of ${set.join(' and ')}, not both: a run sends the keys of one of them (WEBDATA_API_KEYS or its _FILE for a pool, WEBDATA_API_KEY for one key)` },
    ]);
  }
  const [from] = set as [ApiKeys['from']];
  if (from === 'WEBDATA_API_KEY') return { keys: [checked({ label: DEFAULT_LABEL, key: (env.WEBDATA_API_KEY as string).trim() }, from)], from };
  if ((env.WEBDATA_TOKEN ?? '').trim() !== '') {
    throw new ValidationError('Conflicting API credentials', [
      { path: `${from}, WEBDATA_TOKEN`, message: 'a pool of keys and a token are two ways of saying who sends: unset WEBDATA_TOKEN to use the pool, or the pool to use the token' },
    ]);
  }
  const text = from === 'WEBDATA_API_KEYS' ? (env.WEBDATA_API_KEYS as string) : keysFile((env.WEBDATA_API_KEYS_FILE as string).trim());
  return { keys: parseKeyList(text, from), from };
}

/**
 * The entries of a list of keys: one per line or between commas, blank ones and `#` comment lines left out. An entry
 * is `label=key` when it starts with a label and `=` and what follows does not start with `=` (so a base64 key's
 * padding, `abc==`, is a bare key); a bare key is labelled `key-<n>`, n its place in the list (1-based).
 */
export function parseKeyList(text: string, from: ApiKeys['from']): ApiKey[] {
  const entries = text
    .split(/[\n,]/)
    .map((entry) => entry.replace(/\r$/, '').trim())
    .filter((entry) => entry !== '' && !entry.startsWith('#'));
  const issues: ValidationIssue[] = [];
  if (entries.length === 0) issues.push({ path: from, message: 'holds no key: give one or more, comma- or newline-separated, each label=key or a bare key' });
  if (entries.length > MAX_KEYS) issues.push({ path: from, message: `holds ${entries.length} entries; the most is ${MAX_KEYS}` });
  const keys = entries.slice(0, MAX_KEYS).map((entry, index) => {
    const labelled = /^([^=]{1,64})=([^=].*)$/s.exec(entry);
    if (labelled && KEY_LABEL.test(labelled[1] as string)) return { label: labelled[1] as string, key: (labelled[2] as string).trim() };
    // A label that is not one: said by its place, the entry itself (maybe a key) never shown.
    if (labelled && /^[\w.-]{1,64}$/.test(labelled[1] as string) && !/^[A-Za-z0-9+/_-]{20,}$/.test(labelled[1] as string)) {
      issues.push({ path: `${from}[${index + 1}]`, message: 'a label is 1 to 32 of a-z, 0-9, _ and - (lower case): rename it' });
      return { label: `key-${index + 1}`, key: (labelled[2] as string).trim() };
    }
    return { label: `key-${index + 1}`, key: entry };
  });
  const labels = new Map<string, number>();
  const values = new Map<string, string>();
  keys.forEach(({ label, key }, index) => {
    issues.push(...problems({ label, key }, `${from}[${index + 1}]`));
    if (labels.has(label)) issues.push({ path: `${from}[${index + 1}]`, message: `the label "${label}" is given twice (entries ${labels.get(label)} and ${index + 1}): give each key a label of its own` });
    else labels.set(label, index + 1);
    const twin = values.get(key);
    if (twin !== undefined) issues.push({ path: `${from}[${index + 1}]`, message: `the key labelled "${label}" is the same key as "${twin}": a key counted twice would be sent twice its limit` });
    else values.set(key, label);
  });
  if (issues.length > 0) throw new ValidationError('Invalid API keys', issues);
  return keys;
}

/**
 * A pipeline's `keys.<label>` settings for labels the run's keys lack, as issues (a label mistyped would leave that key
 * at the pipeline's rate): `holder` says where the keys came from.
 */
export function unknownKeyLabels(settings: Readonly<Record<string, unknown>> | undefined, labels: readonly string[], holder: string): ValidationIssue[] {
  return Object.keys(settings ?? {})
    .filter((label) => !labels.includes(label))
    .map((label) => ({ path: `keys.${label}`, message: `no key is labelled "${label}": ${holder} holds ${labels.map((each) => `"${each}"`).join(', ')}` }));
}

/**
 * A key as the state store knows it: a keyed hash (HMAC-SHA256 under the store's own random secret), never the key.
 * Another database, another secret: a fingerprint tells nothing about the key outside the database that holds it.
 */
export function keyFingerprint(key: string, secret: Uint8Array): string {
  return createHmac('sha256', secret).update(key).digest('base64url').slice(0, 22);
}

/** Why an entry cannot be sent as an `x-api-key` header, said by its label. */
function problems({ label, key }: ApiKey, path: string): ValidationIssue[] {
  if (key === '') return [{ path, message: `the key labelled "${label}" is empty` }];
  if (!HEADER_VALUE.test(key)) {
    return [{ path, message: `the key labelled "${label}" is not an HTTP header value: a line break, a control or an invisible character pasted with it?` }];
  }
  return [];
}

function checked(key: ApiKey, from: ApiKeys['from']): ApiKey {
  const found = problems(key, from);
  if (found.length > 0) throw new ValidationError('Invalid API key', found);
  return key;
}

/** The text of WEBDATA_API_KEYS_FILE: a regular file of its owner's, readable by nobody else, bounded. */
function keysFile(path: string): string {
  const refuse = (message: string) => new ValidationError('Invalid API keys file', [{ path: 'WEBDATA_API_KEYS_FILE', message: `${path} ${message}` }]);
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) throw refuse('does not exist');
  if (!stat.isFile()) throw refuse('is not a file');
  // As ssh refuses a private key others can read: the file holds keys, and group or other may read it.
  if ((stat.mode & 0o077) !== 0) throw refuse(`is readable or writable by others (mode ${(stat.mode & 0o777).toString(8)}): chmod 600 ${path}`);
  return readInputFile(path, { maxBytes: MAX_KEYS_FILE_BYTES, field: 'WEBDATA_API_KEYS_FILE', subject: 'Invalid API keys file', tooLarge: 'a keys file holds one key a line' });
}
