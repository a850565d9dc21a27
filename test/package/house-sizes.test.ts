// Sizes held by a test, beside the floors (test/package/import-floors.test.ts): no source file over 400 lines, no function over
// 120 (docs/development.md, "Sizes"). A room that grows past them wants splitting by role before it grows further; this
// fails the build the day one does, naming it.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { type Node, SyntaxKind } from 'typescript/unstable/ast';
import { API } from 'typescript/unstable/sync';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const SRC = join(ROOT, 'src');
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 120;

const sourceFiles = (): string[] =>
  readdirSync(SRC, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => relative(ROOT, join(SRC, file)).split('\\').join('/'));

/** Lines of a text as an editor numbers them (a last line end opens no line). */
const linesOf = (text: string): number => text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

/** What counts as a function: declarations, expressions, arrows, methods, constructors, accessors. */
const FUNCTIONS = new Set<SyntaxKind>([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.FunctionExpression,
  SyntaxKind.ArrowFunction,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor,
]);

/** Where a node's own text begins: past the whitespace and comments (its doc comment too) that lead it. */
function firstToken(text: string, pos: number): number {
  for (;;) {
    const trivia = /^(?:\s+|\/\/[^\n]*|\/\*[\s\S]*?\*\/)/.exec(text.slice(pos, pos + 4096));
    if (!trivia) return pos;
    pos += trivia[0].length;
  }
}

interface Long {
  where: string;
  lines: number;
}

/**
 * Every function of `files` longer than `max` lines, from its first token to its last: the syntax trees come
 * from the project's own TypeScript (7, through its API), so a brace in a string or a regular expression cannot mislead.
 */
function longFunctions(files: readonly string[], max = MAX_FUNCTION_LINES): Long[] {
  const api = new API({ cwd: ROOT });
  try {
    const project = api.updateSnapshot({ openProject: join(ROOT, 'tsconfig.json') }).getProjects()[0];
    if (!project) throw new Error('TypeScript opened no project for tsconfig.json');
    const long: Long[] = [];
    for (const file of files) {
      const source = project.program.getSourceFile(join(ROOT, file));
      if (!source) throw new Error(`TypeScript has no source file ${file}`);
      const text = source.text;
      const starts = [0];
      for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
      const lineOf = (pos: number): number => {
        let low = 0;
        let high = starts.length - 1;
        while (low < high) {
          const mid = (low + high + 1) >> 1;
          if ((starts[mid] as number) <= pos) low = mid;
          else high = mid - 1;
        }
        return low + 1;
      };
      const visit = (node: Node): void => {
        if (FUNCTIONS.has(node.kind)) {
          const first = lineOf(firstToken(text, node.pos));
          const lines = lineOf(node.end) - first + 1;
          if (lines > max) long.push({ where: `${file}:${first}`, lines });
        }
        node.forEachChild(visit);
      };
      visit(source);
    }
    return long;
  } finally {
    api.close();
  }
}

describe('the sizes of the house', () => {
  const files = sourceFiles();

  it(`no source file is over ${MAX_FILE_LINES} lines`, () => {
    const big = files.map((file) => ({ file, lines: linesOf(readFileSync(join(ROOT, file), 'utf8')) })).filter(({ lines }) => lines > MAX_FILE_LINES);
    expect(big, 'split these by role (docs/development.md, "Sizes")').toEqual([]);
  });

  it(`no function is over ${MAX_FUNCTION_LINES} lines, counted from its first token to its end`, () => {
    expect(longFunctions(files), 'split these into named steps (docs/development.md, "Sizes")').toEqual([]);
  });

  it('the measure counts what it is meant to: this file, at a bound of 30 lines, has exactly longFunctions over it, at its length', () => {
    // longFunctions runs from its `function` line (its doc comment not counted) to the first `}` alone on a line after
    // it; everything else here is shorter than 30 lines, the describe's arrow included.
    const own = relative(ROOT, import.meta.filename).split('\\').join('/');
    const lines = readFileSync(import.meta.filename, 'utf8').split('\n');
    const first = lines.findIndex((line) => line.startsWith('function longFunctions(')) + 1;
    const last = lines.findIndex((line, index) => index >= first && line === '}') + 1;
    expect(longFunctions([own], 30)).toEqual([{ where: `${own}:${first}`, lines: last - first + 1 }]);
  });
});
