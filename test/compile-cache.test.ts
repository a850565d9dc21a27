import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, config, envFor } from './cli-helpers.ts';
import { simulator } from './helpers.ts';
import { workdir } from './pipeline-helpers.ts';

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
});
