// The README's quick start (`npm ci && npm start`, then `npm test`) on a machine whose `node` is older than the
// project's floor (Debian's is 20): the npm scripts run through scripts/with-node.mjs, which runs them on Node 24 from
// the npm registry (installed once into the user's cache) or says in one line what to install.
//
// "An old Node" is the first Node on this machine older than the floor (/usr/bin/node here). On a machine with none,
// the launcher's WEBDATA_NODE_TOO_OLD=1 makes the running Node act as one, so these cases are never skipped.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { config, envFor, ROOT } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';

const LAUNCHER = join(ROOT, 'scripts/with-node.mjs');
const CLI = join(ROOT, 'src/cli/main.ts');
// The first run on a machine may download Node 24 (about 30 MB) before it runs anything.
const PROVISIONING = { timeout: 300_000 };

const FLOOR = (() => {
  const range = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
  const [, major, minor] = /^>=(\d+)\.(\d+)/.exec(range) ?? [];
  return [Number(major), Number(minor)] as const;
})();
const newEnough = (version: string | undefined) => {
  const [major = 0, minor = 0] = (version ?? '').split('.').map(Number);
  return major > FLOOR[0] || (major === FLOOR[0] && minor >= FLOOR[1]);
};
const versionOf = (node: string) => {
  const result = spawnSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : undefined;
};

let found: { node: string; env: Record<string, string> } | undefined;
/** A Node older than the floor, and what to add to the environment (nothing, unless it is the running one acting old). */
function oldNode() {
  if (found) return found;
  const seen = new Set<string>();
  for (const node of ['/usr/bin/node', ...(process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'node'))]) {
    if (!existsSync(node) || seen.has(realpathSync(node))) continue;
    seen.add(realpathSync(node));
    const version = versionOf(node);
    if (version && !newEnough(version)) return (found = { node, env: {} });
  }
  return (found = { node: process.execPath, env: { WEBDATA_NODE_TOO_OLD: '1' } });
}

/** A fresh shell's environment (none of the npm variables of the `npm test` running us) with the old Node first on PATH. */
function oldShellEnv(extra: Record<string, string> = {}) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'WEBDATA_NODE_TOO_OLD'));
  return { ...env, PATH: `${dirname(oldNode().node)}${delimiter}${process.env.PATH ?? ''}`, ...oldNode().env, ...extra } as Record<string, string>;
}

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function watch(child: ChildProcess) {
  let stdout = '';
  let stderr = '';
  const watchers = new Set<() => void>();
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    for (const w of watchers) w();
  });
  const done = new Promise<Ended>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  const whileRunning = <T>(promise: Promise<T>) =>
    Promise.race([
      promise,
      done.then((ended) => {
        throw new Error(`the process ended (exit ${ended.code}) before the test could act on it:\n${ended.stderr}`);
      }),
    ]);
  const printed = (text: string) =>
    whileRunning(
      new Promise<void>((resolve) => {
        const w = () => {
          if (stderr.includes(text)) resolve();
        };
        watchers.add(w);
        w();
      }),
    );
  return { done, whileRunning, printed };
}

const run = (command: string, args: string[], options: { cwd?: string; env: Record<string, string> }) =>
  watch(spawn(command, args, { cwd: options.cwd ?? ROOT, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] })).done;

/**
 * A directory that looks like a checkout (package.json, node_modules, scripts, src and pipelines link to this one),
 * for npm scripts to run in exactly as written while what they write (data/, the run's state) stays in it.
 */
function checkout() {
  const dir = mkdtempSync(join(tmpdir(), 'webdata-etl-checkout-'));
  for (const name of ['package.json', 'node_modules', 'scripts', 'src', 'pipelines']) symlinkSync(join(ROOT, name), join(dir, name));
  mkdirSync(join(dir, 'data'));
  return {
    dir,
    path: (name: string) => join(dir, name),
    [Symbol.dispose]() {
      // rmSync removes the links, not what they point to.
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('the quick start on a Node older than the floor', () => {
  it('npm start runs the main job to its summary, on a Node it provides', PROVISIONING, async () => {
    using here = checkout();
    const result = await run('npm', ['start'], { cwd: here.dir, env: oldShellEnv() });
    expect(result.stderr).not.toContain('ERR_UNKNOWN_FILE_EXTENSION');
    expect(result.code, result.stderr).toBe(0);
    // After npm's own lines, the run's summary as JSON.
    const summary = JSON.parse(result.stdout.slice(result.stdout.search(/^\{/m))) as { status: string; pages: { fetched: number } };
    expect(summary.status).toBe('completed');
    expect(summary.pages.fetched).toBe(27);
    expect(existsSync(here.path('data/rank.sqlite'))).toBe(true);
  });

  it('npm test runs vitest, and the processes tests start with process.execPath, on Node >= the floor', PROVISIONING, async () => {
    using here = checkout();
    writeFileSync(
      here.path('probe.test.mjs'),
      `import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { test } from 'vitest';
test('probe', () => {
  const child = execFileSync(process.execPath, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
  writeFileSync(process.env.WEBDATA_PROBE_OUT, JSON.stringify({ vitest: process.versions.node, child }));
});
`,
    );
    const out = here.path('probe.json');
    const result = await run('npm', ['test', '--', 'probe.test.mjs'], { cwd: here.dir, env: oldShellEnv({ WEBDATA_PROBE_OUT: out }) });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const probe = JSON.parse(readFileSync(out, 'utf8')) as { vitest: string; child: string };
    expect(newEnough(probe.vitest), probe.vitest).toBe(true);
    expect(newEnough(probe.child), probe.child).toBe(true);
  });

  it('with no Node to be had (offline), one line says what to install; exit 1, no stack trace, nothing left behind', async () => {
    using dir = workdir();
    const home = dir.path('node');
    const result = await run(oldNode().node, [LAUNCHER, '-e', '0'], {
      env: oldShellEnv({ WEBDATA_NODE_HOME: home, npm_config_offline: 'true', npm_config_cache: dir.path('npm-cache'), npm_lifecycle_event: 'start' }),
    });
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split('\n');
    // The install it tried, announced before it started; then why it failed and what to do.
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('installing Node 24');
    const floor = FLOOR.join('\\.');
    expect(lines[1]).toMatch(
      new RegExp(
        `^webdata-etl needs Node\\.js >= ${floor} \\(this is [\\d.]+\\) and could not get Node 24 from the npm registry \\(ENOTCACHED: .*\\): ` +
          `install Node\\.js >= ${floor} \\(e\\.g\\. Node 24 LTS\\), then run \`npm start\` again\\.$`,
      ),
    );
    expect(result.stderr).not.toMatch(/^\s+at /m);
    // The failed install's staging directory is gone: the next attempt starts clean.
    expect(readdirSync(home)).toEqual([]);
  });

  it('ignores a relative XDG_CACHE_HOME (the XDG rules), installing into ~/.cache rather than under the working directory', async () => {
    using dir = workdir();
    const home = dir.path('home');
    const result = await run(oldNode().node, [LAUNCHER, '-e', '0'], {
      cwd: dir.dir,
      env: oldShellEnv({ HOME: home, XDG_CACHE_HOME: 'relative-cache', npm_config_offline: 'true', npm_config_cache: dir.path('npm-cache') }),
    });
    expect(result.code).toBe(1);
    expect(result.stderr.split('\n')[0]).toContain(`into ${join(home, '.cache', 'webdata-etl', 'node24')}, once`);
    expect(existsSync(dir.path('relative-cache'))).toBe(false);
  });

  it('the installed webdata-etl bin on an old Node says in one line what it needs (was a TypeError from inside undici), exit 1', async () => {
    // The package as npm installs it (dist/ and package.json, no .ci/): Node is the user's to install.
    using installed = workdir();
    mkdirSync(join(installed.dir, 'dist/cli'), { recursive: true });
    writeFileSync(join(installed.dir, 'dist/cli/main.js'), readFileSync(join(ROOT, 'dist/cli/main.js')));
    writeFileSync(join(installed.dir, 'package.json'), readFileSync(join(ROOT, 'package.json')));
    const result = await run(oldNode().node, [join(installed.dir, 'dist/cli/main.js'), 'run', 'pipelines/rank-tracking.ts', '--simulator'], { env: oldShellEnv() });
    expect(result.code).toBe(1);
    const floor = FLOOR.join('\\.');
    expect(result.stderr).toMatch(new RegExp(`^webdata-etl: needs Node\\.js ${floor} or newer; this is [\\d.]+\\. Install Node\\.js 24 LTS \\(https://nodejs\\.org\\) and run it again\\n$`));
    expect(result.stdout).toBe('');
  });

  it('in this repository the bin on an old Node names .ci/use-node.sh, and .nvmrc names a Node new enough (was only nodejs.org)', async () => {
    const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const advice = (script: string) =>
      new RegExp(
        `^${escape(`webdata-etl: needs Node.js ${FLOOR.join('.')} or newer; this is `)}[\\d.]+` +
          `${escape(`. In this repository, \`. ${script}\` puts Node 24 first on PATH (with nvm or fnm: \`nvm use\` or \`fnm use\`, which read .nvmrc); then run it again\n`)}$`,
      );
    const atRoot = await run(oldNode().node, [join(ROOT, 'dist/cli/main.js'), 'run', 'pipelines/rank-tracking.ts', '--simulator'], { env: oldShellEnv() });
    expect(atRoot.code).toBe(1);
    expect(atRoot.stderr).toMatch(advice('.ci/use-node.sh'));
    // From elsewhere, the script's whole path: sourced from anywhere, it finds the checkout by its own path.
    using elsewhere = workdir();
    const away = await run(oldNode().node, [join(ROOT, 'dist/cli/main.js'), '--version'], { cwd: elsewhere.dir, env: oldShellEnv() });
    expect(away.stderr).toMatch(advice(join(ROOT, '.ci/use-node.sh')));
    // What nvm and fnm read: a major version, new enough.
    const nvmrc = readFileSync(join(ROOT, '.nvmrc'), 'utf8');
    expect(nvmrc).toMatch(/^\d+\n$/);
    expect(newEnough(`${nvmrc.trim()}.0`)).toBe(true);
  });

  it('arguments, exit code and a death by signal come through the Node it provides', PROVISIONING, async () => {
    const env = oldShellEnv();
    const echoed = await run(oldNode().node, [LAUNCHER, '-e', 'console.log(JSON.stringify([process.versions.node, process.argv.slice(1)])); process.exitCode = 3', '--', 'a b', '', "c'd"], { env });
    expect(echoed.code, echoed.stderr).toBe(3);
    const [version, args] = JSON.parse(echoed.stdout) as [string, string[]];
    expect(newEnough(version), version).toBe(true);
    expect(args).toEqual(['a b', '', "c'd"]);

    const killed = await run(oldNode().node, [LAUNCHER, '-e', 'process.kill(process.pid, "SIGTERM")'], { env });
    expect(killed).toMatchObject({ code: null, signal: 'SIGTERM' });
  });

  it("Ctrl-C stops a run through it gracefully: the run gets one SIGINT, not two (which would abort it); exit 130", PROVISIONING, async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, {}, { queries: ['a', 'b', 'c', 'd'], maxPages: 3 });
    // "d" is held by the simulator: the run is in flight when the signal comes, however fast the machine.
    const d = sim.park({ q: 'd' });
    // detached: the launcher leads a process group of its own, as a shell's foreground job does; a terminal's Ctrl-C
    // is SIGINT to every process of that group.
    const child = spawn(oldNode().node, [LAUNCHER, '--conditions=webdata-etl:source', CLI, 'run', file], {
      cwd: dir.dir,
      env: oldShellEnv(envFor(sim.url)),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const group = -(child.pid ?? 0);
    const running = watch(child);
    try {
      await running.whileRunning(d.reached());
      process.kill(group, 'SIGINT');
      await running.printed('SIGINT: stopping');
      d.release();
      const ended = await running.done;
      expect(ended.code, ended.stderr).toBe(130);
      expect(ended.stderr.split('SIGINT: stopping').length - 1).toBe(1);
      expect(ended.stderr).not.toContain('aborting');
      expect((JSON.parse(ended.stdout) as { status: string }).status).toBe('interrupted');
    } finally {
      d.release();
      try {
        process.kill(group, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  });
});

describe('on a Node new enough', () => {
  it('the launcher becomes node <args> in place: the same process, arguments and exit code as given', async () => {
    const { WEBDATA_NODE_TOO_OLD: _ignored, ...env } = process.env;
    const child = spawn(process.execPath, [LAUNCHER, '-e', 'console.log(JSON.stringify([process.pid, process.argv.slice(1)])); process.exitCode = 3', '--', 'a b'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const ended = await watch(child).done;
    expect(ended.code, ended.stderr).toBe(3);
    const [pid, args] = JSON.parse(ended.stdout) as [number, string[]];
    expect(args).toEqual(['a b']);
    // No wrapper process whose signals would need passing on (Windows has no execve: there it is a child).
    if (process.platform !== 'win32') expect(pid).toBe(child.pid);
  });
});
