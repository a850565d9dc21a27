import { chmodSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { keyFingerprint, readApiKeys } from '../../src/client/api-keys.ts';
import { ValidationError } from '../../src/errors/index.ts';
import { workdir } from '../pipeline-helpers.ts';

const A = 'sk_live_4f9a1c7e2b8d0a6f';
const B = 'sk_live_77aa00bb11cc22dd';
const C = 'dGhpcyBpcyBhIGJhc2U2NCBrZXk=';

/** The problems of an environment, as the command line would say them (exit 2), with the keys checked absent. */
function refusal(env: Record<string, string>): string[] {
  try {
    readApiKeys(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    const said = (error as ValidationError).issues.map((issue) => `${issue.path}: ${issue.message}`);
    for (const key of [A, B, C]) expect(said.join('\n')).not.toContain(key);
    return said;
  }
  throw new Error('not refused');
}

describe('the keys a run may send, from the environment only', () => {
  it('WEBDATA_API_KEY alone is one key labelled default; nothing set is none; an empty variable counts as unset', () => {
    expect(readApiKeys({ WEBDATA_API_KEY: A })).toEqual({ keys: [{ label: 'default', key: A }], from: 'WEBDATA_API_KEY' });
    expect(readApiKeys({})).toBeUndefined();
    expect(readApiKeys({ WEBDATA_API_KEYS: '', WEBDATA_API_KEYS_FILE: '  ', WEBDATA_API_KEY: A })?.from).toBe('WEBDATA_API_KEY');
  });

  it('WEBDATA_API_KEYS: comma- or newline-separated, label=key or bare keys labelled by their place, base64 padding kept', () => {
    expect(readApiKeys({ WEBDATA_API_KEYS: `main=${A}, ${B}\n${C}\n` })).toEqual({
      keys: [
        { label: 'main', key: A },
        { label: 'key-2', key: B },
        { label: 'key-3', key: C },
      ],
      from: 'WEBDATA_API_KEYS',
    });
    // Blank lines, CRLF and comment lines are not entries.
    expect(readApiKeys({ WEBDATA_API_KEYS: `# team keys\r\n\r\nclient-a=${A}\r\nclient_b=${B}\r\n` })?.keys.map((k) => k.label)).toEqual(['client-a', 'client_b']);
  });

  it('a file named by WEBDATA_API_KEYS_FILE, readable by its owner only (as ssh wants a private key)', () => {
    using dir = workdir();
    const file = dir.path('keys');
    writeFileSync(file, `one=${A}\ntwo=${B}\n`, { mode: 0o600 });
    expect(readApiKeys({ WEBDATA_API_KEYS_FILE: file })?.keys).toEqual([
      { label: 'one', key: A },
      { label: 'two', key: B },
    ]);
    chmodSync(file, 0o640);
    expect(refusal({ WEBDATA_API_KEYS_FILE: file })).toEqual([`WEBDATA_API_KEYS_FILE: ${file} is readable or writable by others (mode 640): chmod 600 ${file}`]);
    expect(refusal({ WEBDATA_API_KEYS_FILE: dir.path('none') })[0]).toMatch(/WEBDATA_API_KEYS_FILE: .*none does not exist/);
    expect(refusal({ WEBDATA_API_KEYS_FILE: dir.dir })[0]).toMatch(/is not a file/);
  });

  it('every problem at once, by the entry’s place and label, never showing a key', () => {
    const said = refusal({ WEBDATA_API_KEYS: `Prod=${A}, a=${B}, a=${C}, b=${A}, c=${B}\u200b` });
    expect(said).toEqual([
      'WEBDATA_API_KEYS[1]: a label is 1 to 32 of a-z, 0-9, _ and - (lower case): rename it',
      'WEBDATA_API_KEYS[3]: the label "a" is given twice (entries 2 and 3): give each key a label of its own',
      'WEBDATA_API_KEYS[4]: the key labelled "b" is the same key as "key-1": a key counted twice would be sent twice its limit',
      'WEBDATA_API_KEYS[5]: the key labelled "c" is not an HTTP header value: a line break, a control or an invisible character pasted with it?',
    ]);
    expect(refusal({ WEBDATA_API_KEYS: ' , \n# nothing\n' })).toEqual(['WEBDATA_API_KEYS: holds no key: give one or more, comma- or newline-separated, each label=key or a bare key']);
  });

  it('two sources at once, or a token beside a pool, are refused naming both', () => {
    expect(refusal({ WEBDATA_API_KEYS: A, WEBDATA_API_KEY: B })[0]).toMatch(/^WEBDATA_API_KEYS, WEBDATA_API_KEY: set one of WEBDATA_API_KEYS and WEBDATA_API_KEY, not both/);
    expect(refusal({ WEBDATA_API_KEYS: A, WEBDATA_TOKEN: 'eyJ.x.y' })[0]).toMatch(/^WEBDATA_API_KEYS, WEBDATA_TOKEN: a pool of keys and a token/);
  });

  it('a fingerprint is a keyed hash: the same key and secret give the same one, another secret another, never the key', () => {
    const secret = Buffer.from('a database of its own, 32 bytes!');
    const print = keyFingerprint(A, secret);
    expect(print).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(keyFingerprint(A, secret)).toBe(print);
    expect(keyFingerprint(B, secret)).not.toBe(print);
    expect(keyFingerprint(A, Buffer.from('another database, another secret'))).not.toBe(print);
    expect(print).not.toContain(A.slice(0, 8));
  });
});
