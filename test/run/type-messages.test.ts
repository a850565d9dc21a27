// What the compiler says when a pipeline's types do not fit (issue 38, item 18): the names survive into the message
// (`NormalizedItem`, not its 14 fields), and a sink of the wrong items reads "Sink<X> is not assignable to Sink<Y>"
// (not a wall about `Participation` and `commits`). A small file, as a user of the repository writes it, is compiled
// with the project's own TypeScript (node_modules/typescript, as `npm run typecheck`), and the text of each diagnostic
// is pinned to the line it is about.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../cli-helpers.ts';

/** Each line is tagged with what it is (`// <tag>`), so that a diagnostic is found by the line it is about. */
const PROBE = `import { definePipeline, defineSink, filterItems, type Item, mapItems, normalize, type NormalizedItem, searchPages, toCsv, toPostgres, toSqlite } from 'webdata-etl';

// As docs/pipelines.md, "Composing in code", shows them.
interface Ranked { query: string; country: string; rank: number; domain: string | null }
const ranked = mapItems((item: NormalizedItem): Ranked => ({ query: item.query, country: item.country, rank: item.rank, domain: item.domain }));
const bestRanks = defineSink<Ranked>({ kind: 'best-ranks', write: () => undefined });
interface Review { app: string; stars: number }
const reviews = defineSink<Review>({ kind: 'reviews', write: () => undefined });
const titles = defineSink<NormalizedItem>({ kind: 'titles', write: () => undefined });
const source = () => searchPages({ queries: ['espresso machine'] });

definePipeline({ name: 'a', source: source(), stages: [normalize()], sinks: [reviews] }); // reviews-after-normalized
definePipeline({ name: 'b', source: source(), sinks: [titles] }); // normalized-after-raw
definePipeline({ name: 'c', source: source(), sinks: [toSqlite({ path: 'x.sqlite' })] }); // sqlite-after-raw
definePipeline({ name: 'd', source: source(), sinks: [toPostgres({ url: 'postgres://localhost/db', table: 'results' })] }); // postgres-after-raw
definePipeline({ name: 'e', source: source(), sinks: [toCsv({ path: 'x.csv' })] }); // csv-after-raw
definePipeline({ name: 'f', source: source(), stages: [normalize(), ranked], sinks: [titles] }); // normalized-after-ranked
definePipeline({ name: 'g', source: source(), stages: [ranked, normalize()], sinks: [titles] }); // stage-in-the-wrong-place
export const row: NormalizedItem = { query: 'espresso machine', country: 'de' }; // a-row-short-of-fields

// These compile: a normalized item is still a record of fields to a stage that takes any (as dedupe() does), and a
// sink takes any items that have what it reads (Ranked's four fields are NormalizedItem's).
export const ranks = definePipeline({ name: 'i', source: source(), stages: [normalize()], sinks: [bestRanks] }); // fine
export const fine = definePipeline({ name: 'h', source: source(), stages: [normalize(), filterItems((item: Item) => item.title !== null), ranked], sinks: [bestRanks] }); // fine
`;

interface Diagnostic {
  tag: string;
  text: string;
}

/** The diagnostics tsc gives for the probe, each with the tag of the line it is about and its whole text. */
function diagnostics(output: string, file: string): Diagnostic[] {
  const lines = PROBE.split('\n');
  const found: Diagnostic[] = [];
  for (const block of output.split(/\n(?=\S)/)) {
    const at = /^(.+?)\((\d+),\d+\): error TS\d+: /.exec(block);
    if (!at) continue;
    expect(at[1], `a diagnostic outside the probe:\n${output}`).toBe(file);
    const tag = /\/\/ ([a-z-]+)$/.exec(lines[Number(at[2]) - 1] ?? '')?.[1] ?? `line ${at[2]}`;
    found.push({ tag, text: block.slice(at[0].length).trim() });
  }
  return found;
}

describe('what the compiler says of types that do not fit: names, not expanded literals', () => {
  let dir = '';
  let found: Diagnostic[] = [];
  const about = (tag: string): string => {
    const said = found.filter((d) => d.tag === tag);
    expect(said, `one diagnostic for "${tag}" in:\n${found.map((d) => `[${d.tag}] ${d.text}`).join('\n')}`).toHaveLength(1);
    return said[0]?.text ?? '';
  };

  beforeAll(async () => {
    // Inside the repository (.scratch/ is ignored by git), so that 'webdata-etl' resolves to src/ as it does for
    // pipelines/ and the tests: the project's tsconfig, by `extends`.
    mkdirSync(join(ROOT, '.scratch'), { recursive: true });
    dir = mkdtempSync(join(ROOT, '.scratch', 'type-messages-'));
    writeFileSync(join(dir, 'probe.ts'), PROBE);
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ extends: relative(dir, join(ROOT, 'tsconfig.json')), include: ['probe.ts'] }));
    const output = await new Promise<string>((resolve) => {
      execFile(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--pretty', 'false'], { cwd: dir, encoding: 'utf8', timeout: 120_000 }, (_, stdout, stderr) =>
        resolve(`${stdout}${stderr}`),
      );
    });
    found = diagnostics(output, 'probe.ts');
  }, 150_000);

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a sink of the wrong items: "Sink<X> is not assignable to Sink<Y>", both named, in two lines', () => {
    const cases: [tag: string, given: string, wanted: string][] = [
      ['reviews-after-normalized', 'Review', 'NormalizedItem'],
      ['normalized-after-raw', 'NormalizedItem', 'Item'],
      ['sqlite-after-raw', 'NormalizedItem', 'Item'],
      ['postgres-after-raw', 'NormalizedItem', 'Item'],
      ['csv-after-raw', 'NormalizedItem', 'Item'],
      ['normalized-after-ranked', 'NormalizedItem', 'Ranked'],
    ];
    for (const [tag, given, wanted] of cases) {
      const text = about(tag);
      expect(text, tag).toMatch(new RegExp(`^Type 'Sink<${given}>' is not assignable to type 'Sink<${wanted}>'\\.\\n`));
      // The reason, in one line: what the items lack, the normalized item by its name.
      expect(text.split('\n'), tag).toHaveLength(2);
      expect(text, tag).not.toMatch(/Participation|commits|NoInfer|run_id: string/);
    }
    expect(about('normalized-after-raw')).toMatch(/Type 'Item' is missing the following properties from type 'NormalizedItem': run_id, query, country, lang, and 10 more\.$/);
  });

  it('a stage in the wrong place names what it is given and what it takes', () => {
    const text = about('stage-in-the-wrong-place');
    expect(text).toContain("'StageMismatch<Item, NormalizedItem>'");
    expect(text).toContain("'Stage<NormalizedItem, Ranked>'");
    expect(text).not.toMatch(/run_id: string/);
  });

  it('a row short of fields names NormalizedItem', () => {
    expect(about('a-row-short-of-fields')).toMatch(/^Type '\{ query: string; country: string; \}' is missing the following properties from type 'NormalizedItem': run_id, lang, page, position, and 8 more\.$/);
  });

  it('nothing else: the lines that must compile do', () => {
    expect(found.map((d) => d.tag).sort()).toEqual(
      ['a-row-short-of-fields', 'csv-after-raw', 'normalized-after-ranked', 'normalized-after-raw', 'postgres-after-raw', 'reviews-after-normalized', 'sqlite-after-raw', 'stage-in-the-wrong-place'].sort(),
    );
  });
});
