// Every link into the documentation goes somewhere: a comment's `docs/<page>.md#<anchor>`, a page's `[…](<page>.md#<anchor>)`, names
// a page that exists and a heading it has (as GitHub makes a heading's anchor). A heading renamed without its links
// left comments pointing at nothing (the design's old `streaming-to-the-program`, issue 39).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** A heading's anchor as GitHub makes it: lower case, markup and punctuation dropped, spaces as hyphens. */
const slug = (heading: string): string =>
  heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/<[^>]+>/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

const anchors = new Map<string, Set<string>>();
/** The anchors of a Markdown page: its headings' (a repeated one numbered, as GitHub does), outside code blocks. */
function anchorsOf(file: string): Set<string> {
  const known = anchors.get(file);
  if (known) return known;
  const found = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1] ?? '');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  anchors.set(file, found);
  return found;
}

function* filesUnder(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* filesUnder(path);
    else if (/\.(ts|mts|mjs|md)$/.test(entry.name)) yield path;
  }
}

/** The page a link names: relative to a page that links, or by its name (docs/ unless it says otherwise) from code. */
function target(from: string, page: string): string {
  if (from.endsWith('.md')) return page === '' ? from : resolve(dirname(from), page);
  const name = page.replace(/^(\.\.\/)*/, '');
  return name.includes('/') ? join(ROOT, name) : existsSync(join(ROOT, 'docs', name)) ? join(ROOT, 'docs', name) : join(ROOT, name);
}

describe('links into the documentation', () => {
  it('every docs/…md#anchor in src/, test/, scripts/ and the pages names a page and a heading that exist', () => {
    const files = [...['src', 'test', 'docs', 'scripts'].flatMap((dir) => [...filesUnder(join(ROOT, dir))]), join(ROOT, 'README.md')];
    const broken: string[] = [];
    let links = 0;
    for (const file of files) {
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, index) => {
          const pattern = file.endsWith('.md') ? /\]\(([^)\s]*?)#([^)\s]+)\)/g : /((?:\.\.\/)*(?:docs\/)?[\w.-]+\.md)#([\w%.-]*[\w%-])/g;
          for (const [, page = '', anchor = ''] of line.matchAll(pattern)) {
            if (/^https?:/.test(page)) continue;
            links += 1;
            const where = `${relative(ROOT, file)}:${index + 1}`;
            const path = target(file, page);
            if (!existsSync(path)) broken.push(`${where}: ${page} (no such page)`);
            else if (path.endsWith('.md') && !anchorsOf(path).has(decodeURIComponent(anchor))) broken.push(`${where}: ${relative(ROOT, path)}#${anchor}`);
          }
        });
    }
    // The test reads what it is meant to: the docs are full of links (446 when it was written).
    expect(links).toBeGreaterThan(300);
    expect(broken).toEqual([]);
  });

  it('every test file the docs and comments name (`test/…/x.test.ts`, a helper `test/…/x.ts`) exists', () => {
    // The tests live in folders by concern: a page that names a test where it used to be points at nothing.
    const files = [...['src', 'test', 'docs', 'scripts'].flatMap((dir) => [...filesUnder(join(ROOT, dir))]), join(ROOT, 'README.md')];
    const missing = new Set<string>();
    let named = 0;
    for (const file of files) {
      for (const [path] of readFileSync(file, 'utf8').matchAll(/\btest\/(?:[\w-]+\/)*[\w.-]+\.ts\b/g)) {
        named += 1;
        if (!existsSync(join(ROOT, path))) missing.add(`${relative(ROOT, file)}: ${path}`);
      }
    }
    expect(named).toBeGreaterThan(100);
    expect([...missing]).toEqual([]);
  });
});
