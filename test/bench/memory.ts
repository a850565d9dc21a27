// (n) Memory without process flags (issue 18): a run of N items — queries × 10 countries × 10 pages of 100, concurrency
// 32, search → normalize → dedupe → SQLite + CSV — in a process of its own started as a user starts it, with no Node
// flag and no environment variable of ours: the built command line run by node (`node dist/cli/main.js run
// config.json`: the bin's shebang and its settings do not apply), a pipeline file run by node, and a program of the
// user's own calling run(), both importing the built package. Its peak resident memory (the kernel's high-water
// mark, VmHWM) is read from /proc while it runs. dist/ is built first, so that it is today's code. The simulator
// answers with items as large as real engines' (`itemSize: 'real'`, about 970 bytes of JSON on average); the short
// items of its default answers (about 320) are the fixture the figures before issue 43 were measured on: `short`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startSimulator } from '../../src/simulator/index.ts';
import { measuredNode } from '../cli/peak-rss.ts';
import { MEMORY_COUNTRIES, memorySearch } from '../fixtures/memory-plan.ts';
import { log } from './throughput.ts';

const ROOT = resolve(import.meta.dirname, '../..');
/**
 * The command line with a JSON config (built, and from the sources) and with a pipeline file, a pipeline file run by node, a program calling
 * run(url), and one calling run(pipeline).
 */
const WAYS = ['cli', 'cliSource', 'cliPipelineFile', 'pipelineFile', 'runCall', 'runObject'] as const;
/**
 * Named only, never run by default: the built command line with V8's own heap growing factors (`node
 * --heap-growing-percent=0 dist/cli/main.js run config.json`), what `cli` was before src/threads/heap-growth.ts, to
 * interleave with it (`cli,cliV8Growth,cli,cliV8Growth`).
 */
const COMPARISONS = ['cliV8Growth'] as const;
type Way = (typeof WAYS)[number] | (typeof COMPARISONS)[number];
/** The ways the aim (< 250 MB) is for: run(pipeline) works in the host's heap, sized by the host's flags. */
export const AIMED_WAYS = WAYS.filter((way) => way !== 'runObject');
const KEY = `bench_${Date.now().toString(36)}_memory`;

type ItemSize = 'real' | 'short';
interface WayRun {
  exitCode: number | null;
  peakRssMb: number;
  seconds: number;
  itemsPerSecond: number;
  /** The process's CPU time, all its threads (what a setting that trades memory for collections costs). */
  cpuSeconds: number;
  stderr?: string;
}

/**
 * Each way in `ways`, in order, with items of each size in `sizes` in turn (interleaved: `cli,cli` with `real,short`
 * runs real, short, real, short). A way's figure is its last run with real items (or short, if only those ran); every
 * run is in `runs`.
 */
export async function scenarioMemory(items: number, ways: readonly Way[] = WAYS, sizes: readonly ItemSize[] = ['real']) {
  const queries = Math.ceil(items / (MEMORY_COUNTRIES.length * 10 * 100));
  log(`(n) memory: ${queries} queries × ${MEMORY_COUNTRIES.length} countries × 10 pages of 100 (${queries * MEMORY_COUNTRIES.length * 1000} items), concurrency 32, no flags`);
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
  const sims = {
    real: await startSimulator({ latencyMs: 0, resultsPerQuery: 1000, logLimit: 0, itemSize: 'real', keys: [{ key: KEY, name: 'main' }] }),
    short: await startSimulator({ latencyMs: 0, resultsPerQuery: 1000, logLimit: 0, itemSize: 'short', keys: [{ key: KEY, name: 'main' }] }),
  };
  const results: Partial<Record<Way, WayRun>> = {};
  const runs: (WayRun & { way: Way; itemSize: ItemSize; load: string })[] = [];
  try {
    for (const [way, itemSize] of ways.flatMap((way) => sizes.map((size) => [way, size] as const))) {
      const env = { WEBDATA_BASE_URL: sims[itemSize].url, WEBDATA_API_KEY: KEY };
      const dir = mkdtempSync(join(tmpdir(), 'webdata-memory-'));
      try {
        const config = { name: 'memory', search: memorySearch(queries), rate: { concurrency: 32 }, sinks: [{ type: 'sqlite', path: 'mem.sqlite' }, { type: 'csv', path: 'mem.csv' }] };
        writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
        const pipelineFile = join(ROOT, 'test/fixtures/memory-pipeline.ts');
        const runProgram = join(ROOT, 'test/fixtures/memory-run.ts');
        const args = {
          cli: [join(ROOT, 'dist/cli/main.js'), 'run', 'config.json'],
          // The same from the sources (`node src/cli/main.ts run config.json`): Node strips the types as it loads.
          cliSource: [join(ROOT, 'src/cli/main.ts'), 'run', 'config.json'],
          cliV8Growth: ['--heap-growing-percent=0', join(ROOT, 'dist/cli/main.js'), 'run', 'config.json'],
          cliPipelineFile: [join(ROOT, 'dist/cli/main.js'), 'run', pipelineFile],
          pipelineFile: [pipelineFile],
          runCall: [runProgram],
          runObject: [runProgram, 'object'],
        }[way];
        const run = await measuredNode(args, { cwd: dir, env: { ...env, MEMORY_QUERIES: String(queries), MEMORY_DIR: dir } });
        const total = queries * MEMORY_COUNTRIES.length * 1000;
        const result = { exitCode: run.code, peakRssMb: run.peakRssMb, seconds: run.seconds, itemsPerSecond: Math.round(total / run.seconds), cpuSeconds: run.cpuSeconds, ...(run.code === 0 ? {} : { stderr: run.stderr.slice(-600) }) };
        if (itemSize === 'real' || !sizes.includes('real')) results[way] = result;
        // The load average beside every figure: the machine is shared.
        const load = loadavg().map((l) => l.toFixed(2)).join(' ');
        runs.push({ way, itemSize, load, ...result });
        log(`(n) ${way}, ${itemSize} items: peak ${run.peakRssMb} MB, ${run.seconds} s (${result.itemsPerSecond} items/s, spawn to exit), CPU ${run.cpuSeconds} s, exit ${run.code}, load ${load}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  } finally {
    await Promise.all([sims.real.close(), sims.short.close()]);
  }
  return { items: queries * MEMORY_COUNTRIES.length * 1000, concurrency: 32, aimMb: 250, itemSizes: sizes, ...results, runs };
}

if (import.meta.main) {
  const items = Number(process.argv[2] ?? 1_000_000);
  const ways = (process.argv[3]?.split(',') ?? WAYS) as Way[];
  const sizes = (process.argv[4]?.split(',') ?? ['real']) as ItemSize[];
  process.stdout.write(`${JSON.stringify(await scenarioMemory(items, ways, sizes))}\n`);
}
