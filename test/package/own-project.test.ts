// The library as its users get it (issue 30, part 3): packed with `npm pack`, installed into a fresh project outside
// this repository, and used from there the way the README's "A project of your own" says — a typed pipeline file run
// by `node pipeline.ts` and by `npx webdata-etl run pipeline.ts`, and a program of one's own that calls `stream()`;
// then installed from a git URL of the repository, which runs `prepare`. Offline, over real sockets. What the tarball holds (`files`, `exports`, the types, the bin) is tested by using it.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../cli-helpers.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { sqliteRows } from '../pipeline-helpers.ts';

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * What a user's shell would hand a command: our Node first on PATH (the `node` that npm, npx and the bin's
 * `#!/usr/bin/env node` find), and none of what this test run carries that a user's shell would not: npm's
 * `npm_*` variables when the tests run under `npm test` (`npm_config_local_prefix` names this repository),
 * `NODE_OPTIONS` (a `--conditions=webdata-etl:source` there would send the import to `src/`, which is not in the
 * tarball), and the `WEBDATA_*` settings.
 */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^npm_/i.test(name) || /^(NODE_OPTIONS|INIT_CWD)$/.test(name) || name.startsWith('WEBDATA_')) continue;
    env[name] = value;
  }
  env.PATH = [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter);
  // Nothing here may reach the network: npm and npx answer from the cache or fail (ENOTCACHED), and a request that
  // got past that would go to a proxy on a closed port. (npm's own proxy settings: the library reads HTTPS_PROXY,
  // and the runs here are on loopback, which it never proxies.)
  env.npm_config_offline = 'true';
  env.npm_config_proxy = 'http://127.0.0.1:9';
  env.npm_config_https_proxy = 'http://127.0.0.1:9';
  env.npm_config_update_notifier = 'false';
  env.npm_config_fund = 'false';
  env.npm_config_audit = 'false';
  return { ...env, ...extra };
}

/**
 * A command as a user types it, asynchronously: the test process keeps answering the simulator it started while the
 * command runs. Never rejects: the outcome is for the test to judge (and to print when it is not what it expects).
 */
function sh(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = userEnv()): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
      resolve({ code, stdout, stderr: error !== null && code === null ? `${stderr}\n${error.message}` : stderr });
    });
  });
}

/** Fails with the command's output when it did not exit 0. */
function succeeded(outcome: Outcome, what: string): Outcome {
  expect(outcome.code, `${what} exited ${outcome.code}\n--- stdout\n${outcome.stdout}\n--- stderr\n${outcome.stderr}`).toBe(0);
  return outcome;
}

/**
 * The lockfile the project starts with: the repository's own entries for what the package needs at run time (its
 * dependencies and theirs, none of the devDependencies), at the versions the repository is tested with.
 * Why: offline, npm has only its cache, which holds what `npm ci` fetched for this repository's lockfile (the
 * registry's documents of those packages, and the locked versions' tarballs). A range resolved afresh
 * (`better-sqlite3@^13.2.0`) takes the newest version those documents list, which may be newer than the locked one,
 * whose tarball was never fetched (ENOTCACHED). Locked to the repository's versions, `npm install <tarball>` needs
 * nothing that `npm ci` did not cache. (Online, a user's `npm install` resolves the same ranges from the registry.)
 */
function runtimeLockfile(project: { name: string; version: string }): string {
  type Entry = { dev?: boolean } & Record<string, unknown>;
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, Entry> };
  const runtime = Object.entries(lock.packages).filter(([path, entry]) => path.startsWith('node_modules/') && entry.dev !== true);
  const packages = { '': { name: project.name, version: project.version }, ...Object.fromEntries(runtime) };
  return `${JSON.stringify({ name: project.name, version: project.version, lockfileVersion: 3, requires: true, packages }, null, 2)}\n`;
}

/**
 * A fresh project in `dir` with the package installed from `spec` (a tarball, a git URL), as the README says:
 * `npm init -y`, `npm pkg set type=module`, better-sqlite3's build script denied, `npm install <spec>`.
 */
async function newProject(dir: string, spec: string, allowScripts: Record<string, boolean> = {}): Promise<Outcome> {
  mkdirSync(dir, { recursive: true });
  // npm 11's `npm init -y` writes "type": "commonjs", under which Node reads pipeline.ts's `import` as CommonJS and
  // fails (SyntaxError: Cannot use import statement outside a module): hence the README's `npm pkg set type=module`.
  succeeded(await sh('npm', ['init', '-y'], dir), 'npm init -y');
  succeeded(await sh('npm', ['pkg', 'set', 'type=module'], dir), 'npm pkg set type=module');
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name: string; version: string };
  writeFileSync(join(dir, 'package-lock.json'), runtimeLockfile(manifest));
  // better-sqlite3 13 carries prebuilt binaries (prebuilds/<platform>.node, loaded at run time). npm 11 still
  // counts its binding.gyp as an install script (`node-gyp rebuild`) and runs it, not yet reviewed, with a warning:
  // with a prebuild for the platform it compiles nothing, but node-gyp needs Python, make and Node's headers all
  // the same. The README's step denies it, as this repository's own package.json does for `npm ci`: the binary
  // that loads is the prebuilt one, and the install needs no build tools.
  succeeded(await sh('npm', ['pkg', 'set', 'allowScripts.better-sqlite3=false', '--json'], dir), 'npm pkg set allowScripts');
  for (const [key, allowed] of Object.entries(allowScripts)) {
    succeeded(await sh('npm', ['pkg', 'set', `allowScripts[${key}]=${allowed}`, '--json'], dir), `npm pkg set allowScripts[${key}]`);
  }
  const install = succeeded(await sh('npm', ['install', '--offline', spec], dir), `npm install ${spec}`);
  const installed = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  expect(Object.keys(installed.dependencies ?? {})).toEqual(['webdata-etl']);
  return install;
}

/**
 * The first ```ts block of a document's section (from its heading to the next heading of any level): the files the
 * project is given are the ones the documentation shows, so the documentation cannot drift from what works.
 */
function documented(file: string, heading: string): string {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const start = text.indexOf(`${heading}\n`);
  if (start < 0) throw new Error(`${file} has no heading "${heading}"`);
  const section = text.slice(start + heading.length).split(/\n#{1,6} /)[0] ?? '';
  const block = /\n```ts\n([\s\S]*?)\n```\n/.exec(section)?.[1];
  if (block === undefined) throw new Error(`${file}, "${heading}": no \`\`\`ts block`);
  return `${block}\n`;
}

/**
 * The pipeline file a user writes, as the README shows it: typed by the package's own types (no `any`, no casts),
 * run by node as it is.
 */
const PIPELINE_TS = documented('README.md', '## A project of your own');

/** A program of one's own, as docs/pipelines.md shows it: a simulator from the package's subpath, the pages by stream(). */
const CONSUME_TS = documented('docs/pipelines.md', '## In a project of your own');

/** The errors a caller of run() acts on, from the package root, as docs/pipelines.md shows them (type-checked only). */
const REJECTS_TS = documented('docs/pipelines.md', '### What a run rejects with');

/** The client on its own and an error class from webdata-etl/errors, as docs/client.md shows them (type-checked only). */
const CLIENT_TS = documented('docs/client.md', '## The client');

/** Each door's runtime names, `import()`ed by name from `cwd` (no source condition: a project's node_modules, or dist/). */
function doorNames(doors: readonly string[], cwd: string): Record<string, string[]> {
  const script = `const names = {}; for (const door of ${JSON.stringify(doors)}) names[door] = Object.keys(await import(door)).sort(); process.stdout.write(JSON.stringify(names));`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '--eval', script], { cwd, env: userEnv(), encoding: 'utf8' })) as Record<string, string[]>;
}

/** What a user's tsconfig.json would say for these files (Node runs them as they are; tsc only checks them). */
const TSCONFIG = {
  compilerOptions: {
    target: 'es2024',
    lib: ['es2024', 'esnext.disposable'],
    module: 'nodenext',
    strict: true,
    noEmit: true,
    allowImportingTsExtensions: true,
    erasableSyntaxOnly: true,
    verbatimModuleSyntax: true,
    // The package's own declarations are checked too: the types they import (better-sqlite3's, pg's) come with it.
    skipLibCheck: false,
    // Node's own types from this repository's node_modules: the project installed nothing but the package.
    typeRoots: [join(ROOT, 'node_modules/@types')],
    types: ['node'],
  },
  include: ['*.ts'],
};

describe('a project of your own: the packed package installed in a fresh directory, offline', () => {
  let base = '';
  let project = '';

  beforeAll(async () => {
    // Outside the repository (tmpdir is): nothing of the repository's node_modules can be found from there.
    base = realpathSync(mkdtempSync(join(tmpdir(), 'webdata-etl-own-')));
    expect(relative(ROOT, base).startsWith('..')).toBe(true);
    project = join(base, 'my-harvest');
    mkdirSync(join(base, 'pack'));

    // The tarball npm would publish. The global setup has just built dist/, so `prepare` (which builds it again)
    // is skipped here: --ignore-scripts.
    const packed = succeeded(await sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', join(base, 'pack')], ROOT), 'npm pack');
    const [tarball] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    expect(tarball).toBeDefined();
    const files = (tarball?.files ?? []).map((file) => file.path);
    // The bin, the root's code and types, each subpath's, and nothing of the repository beyond dist/.
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/cli/main.js', 'dist/index.js', 'dist/index.d.ts', 'dist/simulator/index.js', 'dist/simulator/index.d.ts']));
    expect(files.filter((file) => !/^(dist\/|package\.json$|README\.md$|LICENSE)/.test(file))).toEqual([]);

    const install = await newProject(project, join(base, 'pack', tarball?.filename ?? ''));
    expect(install.stdout + install.stderr).not.toMatch(/better-sqlite3|gyp/);
    expect(existsSync(join(project, 'node_modules/better-sqlite3/build'))).toBe(false);
    // npm lists webdata-etl's own `prepare` as not covered, for a tarball, though it runs it only for a git URL or a
    // directory: the README's step answers it, and the next install says nothing of install scripts.
    expect(install.stderr).toMatch(/install scripts not yet covered by allowScripts:\n.*webdata-etl@[\d.]+ \(prepare: npm run build\)/);
    succeeded(await sh('npm', ['install-scripts', 'deny', 'webdata-etl'], project), 'npm install-scripts deny webdata-etl');
    rmSync(join(project, 'node_modules'), { recursive: true, force: true });
    const again = succeeded(await sh('npm', ['install', '--offline'], project), 'npm install, again');
    expect(again.stdout + again.stderr).not.toMatch(/install-scripts|allowScripts/);

    writeFileSync(join(project, 'pipeline.ts'), PIPELINE_TS);
    writeFileSync(join(project, 'consume.ts'), CONSUME_TS);
    writeFileSync(join(project, 'rejects.ts'), REJECTS_TS);
    writeFileSync(join(project, 'client.ts'), CLIENT_TS);
    writeFileSync(join(project, 'tsconfig.json'), `${JSON.stringify(TSCONFIG, null, 2)}\n`);
  }, 180_000);

  afterAll(() => {
    if (base) rmSync(base, { recursive: true, force: true });
  });

  it('the files type-check against the types the package ships (strict; no any, no casts in them): the pipeline, the program, and the snippets of the root\'s errors and the client', async () => {
    succeeded(await sh(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], project), 'tsc');
  });

  it('the root and every subpath of the installed package import by name, with the values the built package has', () => {
    const installed = JSON.parse(readFileSync(join(project, 'node_modules/webdata-etl/package.json'), 'utf8')) as { exports: Record<string, unknown> };
    const doors = Object.keys(installed.exports).filter((key) => key !== './package.json').map((key) => (key === '.' ? 'webdata-etl' : `webdata-etl/${key.slice(2)}`));
    expect(doors).toEqual(expect.arrayContaining(['webdata-etl', 'webdata-etl/errors', 'webdata-etl/client', 'webdata-etl/notifications', 'webdata-etl/simulator']));
    const names = doorNames(doors, project);
    for (const door of doors) expect(names[door]?.length, door).toBeGreaterThan(0);
    expect(names['webdata-etl']?.length).toBeLessThanOrEqual(30);
    expect(names).toEqual(doorNames(doors, ROOT));
  });

  it('node pipeline.ts, against a simulator the test starts (--base-url, the key from the environment)', async () => {
    await using sim = await simulator({ seed: 3 });
    const ran = succeeded(await sh(process.execPath, ['pipeline.ts', '--base-url', sim.url, '--quiet'], project, userEnv({ WEBDATA_API_KEY: TEST_KEY })), 'node pipeline.ts');
    const summary = JSON.parse(ran.stdout) as { status: string; items: { written: number } };
    expect(summary.status).toBe('completed');
    expect(summary.items.written).toBeGreaterThan(0);
    const rows = sqliteRows(join(project, 'data/results.sqlite'), 'SELECT run_id, country, page FROM results');
    expect(rows).toHaveLength(summary.items.written);
    expect(new Set(rows.map((row) => `${row.country}#${row.page}`))).toEqual(new Set(['us#1', 'us#2', 'gb#1', 'gb#2']));
    expect(ran.stdout + ran.stderr).not.toContain(TEST_KEY);
  });

  it('npx webdata-etl run pipeline.ts --simulator: the bin of the installed package', async () => {
    const ran = succeeded(await sh('npx', ['webdata-etl', 'run', 'pipeline.ts', '--simulator'], project), 'npx webdata-etl run pipeline.ts --simulator');
    expect(ran.stderr).toMatch(/simulator at http:\/\/127\.0\.0\.1:\d+\/api\/v1/);
    expect(ran.stderr).toMatch(/first-steps: completed in/);
    const summary = JSON.parse(ran.stdout) as { status: string; runId: string; items: { written: number } };
    expect(summary.status).toBe('completed');
    // The second run's rows join the first's in the same table, under their own run_id.
    const runs = sqliteRows(join(project, 'data/results.sqlite'), 'SELECT run_id, count(*) AS n FROM results GROUP BY run_id');
    expect(runs).toHaveLength(2);
    expect(runs.find((row) => row.run_id === summary.runId)?.n).toBe(summary.items.written);
  });

  it('a program of its own: stream() yields the committed pages, and its summary follows', async () => {
    const ran = succeeded(await sh(process.execPath, ['consume.ts'], project), 'node consume.ts');
    const lines = ran.stdout.trim().split('\n');
    expect(lines).toHaveLength(4);
    const pages = lines.slice(0, 3);
    expect(pages.map((line) => /^page (\d):/.exec(line)?.[1]).sort()).toEqual(['1', '2', '3']);
    for (const line of pages) expect(line).toMatch(/^page \d: 10 items, first https?:\/\/\S+$/);
    expect(lines[3]).toBe('completed: 30 items written');
    expect(sqliteRows(join(project, 'data/consumed.sqlite'), 'SELECT count(*) AS n FROM results')).toEqual([{ n: 30 }]);
  });

  it('npm install git+file://<this repository>#<HEAD>: npm runs its `prepare`, which builds dist/, and the bin runs', async (context) => {
    // The committed HEAD, as a git URL gives it: npm clones it, installs its devDependencies in the clone (offline,
    // from its lockfile) and runs `prepare` (`npm run build`), then packs the clone as it would publish it.
    const head = await sh('git', ['rev-parse', 'HEAD'], ROOT);
    if (head.code !== 0) context.skip('not a git checkout: no git URL to install from');
    const fromGit = join(base, 'from-git');
    // The README's step: allowed by the URL installed (npm keys a git dependency's scripts by its URL, not its name).
    const url = `git+file://${ROOT}#${head.stdout.trim()}`;
    const install = await newProject(fromGit, url, { [url]: true });
    expect(install.stdout + install.stderr).not.toMatch(/better-sqlite3|gyp|install-scripts|allowScripts/);
    expect(existsSync(join(fromGit, 'node_modules/webdata-etl/dist/cli/main.js'))).toBe(true);
    expect(existsSync(join(fromGit, 'node_modules/webdata-etl/src'))).toBe(false);
    writeFileSync(join(fromGit, 'pipeline.ts'), PIPELINE_TS);
    const ran = succeeded(await sh('npx', ['webdata-etl', 'run', 'pipeline.ts', '--simulator', '--quiet'], fromGit), 'npx webdata-etl run pipeline.ts --simulator');
    expect((JSON.parse(ran.stdout) as { status: string }).status).toBe('completed');
  }, 180_000);
});
