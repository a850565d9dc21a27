#!/usr/bin/env -S MALLOC_ARENA_MAX=1 node --max-semi-space-size=4
// A small young generation (4 MB semi-spaces): V8 then collects page-sized garbage early instead of letting the heap
// grow. One malloc arena (glibc; ignored elsewhere): with one per thread, memory that V8's helper threads and SQLite
// freed stays in arenas the process holds. They matter for the commands that work on this thread (export, report);
// `run` works on a thread of its own whose heap is bounded from inside (src/threads/bounded-thread.ts), so that a run
// keeps its footprint however node is started (docs/testing.md, "Volume").
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// Checked before anything else is loaded: on an older Node the first import fails far from here (undici on Node 20:
// "Cannot read properties of undefined (reading 'bind')"), which tells a user nothing. The floor has one home,
// package.json's engines.node (">=MAJOR.MINOR"), one level above src/ and dist/ alike.
const engines = (createRequire(import.meta.url)('../../package.json') as { engines: { node: string } }).engines.node;
const [floorMajor = 0, floorMinor = 0] = (/^>=(\d+)\.(\d+)/.exec(engines) ?? []).slice(1).map(Number);
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
// WEBDATA_NODE_TOO_OLD=1 acts as though this Node were too old, as scripts/with-node.mjs does: for tests on machines with none.
const tooOld = major < floorMajor || (major === floorMajor && minor < floorMinor) || process.env.WEBDATA_NODE_TOO_OLD === '1';

if (tooOld) {
  process.stderr.write(`webdata-etl: needs Node.js ${floorMajor}.${floorMinor} or newer; this is ${process.versions.node}. ${howToGetNode()}\n`);
  process.exitCode = 1;
} else if (process.argv[2] === 'run') {
  // A run works on a thread of its own with a bounded heap (src/threads/bounded-thread.ts); this one loads only what
  // starts it, so that the process holds one copy of the library, not two. First, the process becomes one with a
  // single malloc arena, as the bin's shebang makes it (src/threads/one-malloc-arena.ts says why).
  const { restartWithOneMallocArena } = await import('../threads/one-malloc-arena.ts');
  restartWithOneMallocArena();
  (await import('./compile-cache.ts')).useCompileCache();
  const { runOnThread } = await import('./run-on-thread.ts');
  process.exitCode = await runOnThread({ kind: 'command', args: process.argv.slice(3) });
} else {
  (await import('./compile-cache.ts')).useCompileCache();
  const { runCli } = await import('./commands.ts');
  await runCli(process.argv.slice(2));
}

/**
 * In a clone of this repository its own script is the answer (it installs Node 24 once, as the npm scripts do, and puts
 * it first on PATH): named as it can be sourced from here. The installed package has no such script.
 */
function howToGetNode(): string {
  const root = resolve(fileURLToPath(import.meta.url), '../../..');
  const script = resolve(root, '.ci/use-node.sh');
  if (!existsSync(script)) return 'Install Node.js 24 LTS (https://nodejs.org) and run it again';
  const sourced = resolve(process.cwd()) === root ? '.ci/use-node.sh' : script;
  return `In this repository, \`. ${sourced}\` puts Node 24 first on PATH (with nvm or fnm: \`nvm use\` or \`fnm use\`, which read .nvmrc); then run it again`;
}
