import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, config, envFor } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';

// The command line keeps Node's compile cache in the user's cache directory (src/cli/compile-cache.ts), for its own
// thread and for the run's threads, which follow NODE_COMPILE_CACHE rather than the main thread's setting.

/** Every file under `dir` (the cache keeps one per compiled module, under a directory per Node version). */
const entries = (dir: string): number => (existsSync(dir) ? readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).length : 0);

describe('the compile cache', () => {
  it('holds the modules the run’s thread loaded, not only those of the thread that starts it, in the user’s cache directory', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    const cache = join(dir.dir, 'xdg-cache');
    const result = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: { ...envFor(sim.url), XDG_CACHE_HOME: cache } });
    expect(result.code).toBe(0);
    // The main thread of `run` loads a handful of modules (tens); the run's thread loads the library (hundreds).
    // Without the variable handed to the thread only the former would be cached (33 against 731, measured).
    expect(entries(join(cache, 'webdata-etl', 'node-compile-cache'))).toBeGreaterThan(200);
    // A second run reads what the first wrote and adds nothing but what changed (nothing).
    const before = entries(join(cache, 'webdata-etl', 'node-compile-cache'));
    expect((await cli(['run', config(dir.dir)], { cwd: dir.dir, env: { ...envFor(sim.url), XDG_CACHE_HOME: cache } })).code).toBe(0);
    expect(entries(join(cache, 'webdata-etl', 'node-compile-cache'))).toBe(before);
  });

  it('is off with NODE_DISABLE_COMPILE_CACHE=1, and goes where NODE_COMPILE_CACHE says', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    const cache = join(dir.dir, 'xdg-cache');
    const off = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: { ...envFor(sim.url), XDG_CACHE_HOME: cache, NODE_DISABLE_COMPILE_CACHE: '1' } });
    expect(off.code).toBe(0);
    expect(entries(cache)).toBe(0);
    const elsewhere = join(dir.dir, 'elsewhere');
    const named = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: { ...envFor(sim.url), XDG_CACHE_HOME: cache, NODE_COMPILE_CACHE: elsewhere } });
    expect(named.code).toBe(0);
    expect(entries(cache)).toBe(0);
    expect(entries(elsewhere)).toBeGreaterThan(200);
  });

  it('ignores a relative XDG_CACHE_HOME, as the XDG rules say, instead of filling the working directory', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    const home = join(dir.dir, 'home');
    mkdirSync(home);
    const result = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: { ...envFor(sim.url), HOME: home, XDG_CACHE_HOME: 'relative-cache' } });
    expect(result.code).toBe(0);
    expect(existsSync(join(dir.dir, 'relative-cache'))).toBe(false);
    expect(entries(join(home, '.cache', 'webdata-etl', 'node-compile-cache'))).toBeGreaterThan(200);
  });

  // Root can own a file as anyone, which is how a directory of another user is made here (CI runs as root).
  const asRoot = process.getuid?.() === 0;
  it.runIf(asRoot)('is not used, and says so in one line, where the directory is another user’s, writable by others or a symlink', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    const cases: Array<[string, (cache: string) => void, RegExp]> = [
      ['another user', (cache) => chownSync(join(cache, 'webdata-etl'), 65534, 65534), /webdata-etl belongs to another user \(uid 65534\)/],
      ['writable by others', (cache) => chmodSync(join(cache, 'webdata-etl', 'node-compile-cache'), 0o777), /node-compile-cache is writable by other users \(mode 777\)/],
      ['a symlink', (cache) => symlinkSync(join(dir.dir, 'elsewhere'), join(cache, 'webdata-etl', 'node-compile-cache')), /node-compile-cache is a symbolic link/],
      ['a cache home writable by others', (cache) => chmodSync(cache, 0o777), /xdg-[a-z ]+ is writable by other users/],
    ];
    for (const [name, spoil, said] of cases) {
      const cache = join(dir.dir, `xdg-${name}`);
      mkdirSync(join(cache, 'webdata-etl', name === 'a symlink' ? '' : 'node-compile-cache'), { recursive: true, mode: 0o700 });
      mkdirSync(join(dir.dir, 'elsewhere'), { recursive: true, mode: 0o700 });
      chmodSync(cache, 0o700);
      spoil(cache);
      const result = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: { ...envFor(sim.url), XDG_CACHE_HOME: cache } });
      expect(result.code, name).toBe(0);
      const lines = result.stderr.split('\n').filter((line) => line.includes('compile cache off'));
      expect(lines, name).toHaveLength(1);
      expect(lines[0], name).toMatch(said);
      expect(entries(join(cache, 'webdata-etl', 'node-compile-cache')), name).toBe(0);
      expect(entries(join(dir.dir, 'elsewhere')), name).toBe(0);
    }
  });
});
