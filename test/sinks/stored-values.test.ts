import { describe, expect, it } from 'vitest';
import { MAX_JSONB_DEPTH, storableJson } from '../../src/sinks/postgres-columns.ts';
import { MAX_KEY_BYTES, storedKey } from '../../src/stored-key.ts';

describe('storedKey: one rule for every stored and indexed key, in SQLite and PostgreSQL', () => {
  it('keeps a key that any database indexes as it is', () => {
    for (const key of ['https://a.example/x?b=1', 'é'.repeat(256), 'search|espresso|us|en', '']) expect(storedKey(key)).toBe(key);
  });

  it('bounds a long key: its beginning and a digest of the whole, so that two keys stay two', () => {
    const a = `https://long.example/${'a'.repeat(6000)}`;
    const b = `${a}b`;
    expect(Buffer.byteLength(storedKey(a))).toBeLessThanOrEqual(MAX_KEY_BYTES);
    expect(storedKey(a)).toMatch(/^https:\/\/long\.example\/a+#sha256=[\w-]{43}$/);
    expect(storedKey(a)).not.toBe(storedKey(b));
    // Stable, and a bounded key is its own stored form (dedupe bounds a normalized key again).
    expect(storedKey(a)).toBe(storedKey(a));
    expect(storedKey(storedKey(a))).toBe(storedKey(a));
    // Counted in bytes, cut on whole characters.
    const cjk = storedKey('中'.repeat(400));
    expect(Buffer.byteLength(cjk)).toBeLessThanOrEqual(MAX_KEY_BYTES);
    expect(cjk.isWellFormed()).toBe(true);
  });

  it('replaces what no database can key: NUL and lone surrogates, each key still its own', () => {
    const nul = storedKey('a\u0000b');
    const lone = storedKey('a\ud800b');
    expect(nul).toMatch(/^a\ufffdb#sha256=/);
    expect(lone).toMatch(/^a\ufffdb#sha256=/);
    expect(nul).not.toBe(lone);
    expect(storedKey('a\ufffdb')).toBe('a\ufffdb');
  });
});

describe('storableJson: JSON text as jsonb takes it', () => {
  it('replaces escapes jsonb refuses (NUL, a lone surrogate), keeps pairs and escaped backslashes', () => {
    expect(storableJson(String.raw`{"a":"\ud800","\udc00":"\u0000","ok":"\ud83d\ude00"}`)).toBe(String.raw`{"a":"\ufffd","\ufffd":"\ufffd","ok":"\ud83d\ude00"}`);
    // A backslash that is itself escaped makes the rest text: nothing to replace.
    expect(storableJson(String.raw`{"a":"\\ud800"}`)).toBe(String.raw`{"a":"\\ud800"}`);
    expect(storableJson(String.raw`{"a":"\\\ud800"}`)).toBe(String.raw`{"a":"\\\ufffd"}`);
  });

  it('keeps nesting past the limit whole, as a JSON string of its text', () => {
    const deep = `{"n":${'['.repeat(MAX_JSONB_DEPTH + 1)}${']'.repeat(MAX_JSONB_DEPTH + 1)}}`;
    expect(JSON.parse(storableJson(deep))).toBe(deep);
    const fine = `{"n":${'['.repeat(MAX_JSONB_DEPTH - 1)}${']'.repeat(MAX_JSONB_DEPTH - 1)},"s":"${'['.repeat(5000)}"}`;
    expect(storableJson(fine)).toBe(fine);
  });
});
