// The source is built in floors (docs/development.md, "Where things are"): each floor uses only the ones below it.
// These tests read src/ and hold the code to that: what a module imports, by relative path, statically (type-only
// imports included) or with import('…').
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..', '..', 'src');

/**
 * The floors, from the ground up: a folder of src/ (its subfolders with it, unless they have a row of their own), or
 * '' for the files in src/ itself. The roof is the package root: above everything, and reaching nothing it should not
 * load (below). The same order as docs/development.md's table.
 */
const FLOORS: readonly (readonly string[])[] = [
  ['', 'errors/'],
  ['threads/'],
  ['commits/'],
  ['client/'],
  ['schedule/', 'refresh/'],
  ['postgres/'],
  ['state/'],
  ['state/sqlite/', 'state/postgres/', 'state/open/'],
  ['pipeline/'],
  ['stages/'],
  ['sources/'],
  ['sinks/'],
  ['host/'],
  ['distributed/'],
  ['analytics/'],
  ['notify/'],
  ['recurring/'],
  ['config/'],
  ['run/'],
  ['report/'],
  ['simulator/'],
  ['cli/'],
];
/**
 * The package's doors above every floor: the root, the webdata-etl/notifications subpath (its schemas are run/'s, its
 * signature check notify/'s), and what the root loads the command line of a pipeline file through (when called, with
 * import()).
 */
const ROOF = ['index.ts', 'notifications.ts', 'run-from-command-line.ts'];
/** The doors a user's program imports by name that must load neither the command line nor the simulator. */
const DOORS = ['index.ts', 'notifications.ts'];

interface Import {
  from: string;
  to: string;
  /** `import type` / `export type`: gone at run time. */
  typeOnly: boolean;
  /** `import('…')`: loaded when the code runs, not with the module. */
  dynamic: boolean;
}

function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [relative(SRC, path).split('\\').join('/')] : [];
  });
}

// A statement at the start of a line: `import …`, `import type …`, `export … from`, a side effect's `import '…'`.
const STATIC = /^(?:import|export)(\s+type)?\s+(?:[\w${}*,\s]+?\s+from\s+)?'(\.[^']+)'/gm;
const DYNAMIC = /\bimport\(\s*'(\.[^']+)'\s*\)/g;

function importsOf(files: readonly string[]): Import[] {
  const known = new Set(files);
  return files.flatMap((from) => {
    const text = readFileSync(join(SRC, from), 'utf8');
    const found: Import[] = [];
    const add = (specifier: string, typeOnly: boolean, dynamic: boolean) => {
      const to = posix.normalize(posix.join(dirname(from), specifier));
      // A relative import that names no file of src/ is a mistake of this reader (or of the code): said, not skipped.
      expect(known.has(to), `${from} imports ${specifier}, which is not a file of src/`).toBe(true);
      found.push({ from, to, typeOnly, dynamic });
    };
    for (const match of text.matchAll(STATIC)) add(match[2] ?? '', match[1] !== undefined, false);
    for (const match of text.matchAll(DYNAMIC)) add(match[1] ?? '', false, true);
    return found;
  });
}

/** The floor a file is on: the row of its longest folder in FLOORS; the roof is above them all. */
function floorOf(file: string): number {
  if (ROOF.includes(file)) return FLOORS.length;
  let best = { floor: -1, length: -1 };
  FLOORS.forEach((folders, floor) => {
    for (const folder of folders) {
      const holds = folder === '' ? !file.includes('/') : file.startsWith(folder);
      if (holds && folder.length > best.length) best = { floor, length: folder.length };
    }
  });
  return best.floor;
}

const inFolder = (file: string, folder: string) => file.startsWith(folder);
const said = (edges: readonly Import[]) => edges.map((edge) => `${edge.from} -> ${edge.to}${edge.typeOnly ? ' (type)' : ''}${edge.dynamic ? ' (import())' : ''}`);

describe('the floors of src/', () => {
  const files = sourceFiles();
  const imports = importsOf(files);

  it('every folder of src/ has its floor', () => {
    expect(files.filter((file) => floorOf(file) < 0)).toEqual([]);
  });

  it('nothing in state/ or sinks/ imports run/', () => {
    expect(said(imports.filter((edge) => (inFolder(edge.from, 'state/') || inFolder(edge.from, 'sinks/')) && inFolder(edge.to, 'run/')))).toEqual([]);
  });

  it('nothing below cli/ imports cli/, not even with import()', () => {
    expect(said(imports.filter((edge) => !inFolder(edge.from, 'cli/') && floorOf(edge.from) < floorOf('cli/') && inFolder(edge.to, 'cli/')))).toEqual([]);
  });

  it("the SQLite store is the store's business: nothing but state/ (and sinks/, for a file's lease and output registry) imports state/sqlite/", () => {
    // The commit thread and the choice of a store sit behind the store's seam (docs/design.md#the-commit-contract):
    // run/ once chose the commit thread by the store's database name and started it itself.
    const reaching = imports.filter((edge) => inFolder(edge.to, 'state/sqlite/') && !inFolder(edge.from, 'state/') && !inFolder(edge.from, 'sinks/'));
    expect(said(reaching)).toEqual([]);
  });

  it('each floor uses only its own and the ones below it', () => {
    expect(said(imports.filter((edge) => !edge.dynamic && floorOf(edge.to) > floorOf(edge.from)))).toEqual([]);
  });

  /** The modules `doors` load with them (static imports, followed; `loaded` leaves out type-only ones), each with how. */
  const reachedFrom = (doors: readonly string[], options: { loaded?: boolean } = {}): Map<string, string[]> => {
    const reached = new Map<string, string[]>(doors.map((door) => [door, [door]]));
    const queue = [...doors];
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
      for (const edge of imports.filter((each) => each.from === file && !each.dynamic && !(options.loaded && each.typeOnly))) {
        if (reached.has(edge.to)) continue;
        reached.set(edge.to, [...(reached.get(file) ?? []), edge.to]);
        queue.push(edge.to);
      }
    }
    return reached;
  };

  it('the package root (and webdata-etl/notifications) loads neither cli/ nor simulator/: its static imports, followed, reach neither', () => {
    const forbidden = [...reachedFrom(DOORS)].filter(([file]) => inFolder(file, 'cli/') || inFolder(file, 'simulator/'));
    expect(forbidden.map(([, path]) => path.join(' -> '))).toEqual([]);
  });

  it("webdata-etl/notifications, a receiver's door, loads no database, store, sink or analytics code (it loaded 38 modules with the PostgreSQL pools)", () => {
    const heavy = ['postgres/', 'state/', 'sinks/', 'analytics/', 'distributed/', 'commits/'];
    const loaded = [...reachedFrom(['notifications.ts'], { loaded: true })].filter(([file]) => heavy.some((folder) => inFolder(file, folder)));
    expect(loaded.map(([, path]) => path.join(' -> '))).toEqual([]);
  });

  it('no import cycle among the modules of src/, type-only imports included', () => {
    const next = new Map<string, string[]>(files.map((file) => [file, []]));
    for (const edge of imports) {
      if (edge.dynamic) continue;
      next.get(edge.from)?.push(edge.to);
    }
    // Depth first: a module met again while still on the path closes a cycle.
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (file: string) => {
      state.set(file, 'open');
      path.push(file);
      for (const to of next.get(file) ?? []) {
        if (state.get(to) === 'open') cycles.push([...path.slice(path.indexOf(to)), to].join(' -> '));
        else if (!state.has(to)) visit(to);
      }
      path.pop();
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });
});
