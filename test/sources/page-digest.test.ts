import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { toJson } from '../../src/json.ts';
import { pageDigest } from '../../src/sources/page-digest.ts';
import { startSimulator } from '../../src/simulator/index.ts';

// The digest a page had when it was hashed from its items' whole JSON: stored digests (a resume's, the repeat rule's)
// must keep meaning the same page.
const wholeJson = (items: unknown[]) => createHash('sha1').update(toJson(items)).digest('base64');

describe("a page's digest, hashed an item at a time", () => {
  it('is the SHA-1 of the whole JSON of its items, whatever they hold', async () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const lists: unknown[][] = [
      [],
      [{ title: 'Café crème — 入門ガイド 🔥', url: 'https://example.com/a?utm_source=x#:~:text=a', snippet: 'lone \ud800 surrogate…' }],
      [{ a: 1 }, null, 2, 'three', [4, { b: [5] }], { c: undefined, d: true }],
      // Deeper than JSON.stringify recurses: the iterative writer's text, as the whole list's.
      [{ a: 'x', b: ['…'] }, { deep }, 3],
    ];
    for (const items of lists) expect(pageDigest(items)).toBe(wholeJson(items));
    // Real answers' items, 100 to a page, of each family.
    await using sim = await startSimulator({ itemSize: 'real', resultsPerQuery: 100, keys: [{ key: 'k_digest', name: 'main' }] });
    for (const q of ['one', 'two', 'three', 'four']) {
      const answer = (await (await fetch(`${sim.url}/searchengine/search?q=${q}&count=100&country=de`, { headers: { 'x-api-key': 'k_digest' } })).json()) as { data: unknown[] };
      expect(answer.data).toHaveLength(100);
      expect(pageDigest(answer.data)).toBe(wholeJson(answer.data));
    }
  });
});
