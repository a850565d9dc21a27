// A run works on a thread of its own whose heap is bounded (src/threads/bounded-thread.ts): the command line, a pipeline
// file run by node, and run(url) in a host program. What a thread changes must not change what a run does.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { run, ValidationError } from '../../src/index.ts';
import { UsageError } from '../../src/errors/index.ts';
import { postedError } from '../../src/threads/posted-error.ts';
import { cli, config, envFor, pipelineFile, startCli } from '../cli-helpers.ts';
import { rejection, simulator, TEST_KEY } from '../helpers.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';

const PROBE = new URL('../fixtures/thread-probe.ts', import.meta.url);
const probeOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'probe.json'), 'utf8')) as { isMainThread: boolean; heapLimitMb: number };
const processOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'process.json'), 'utf8')) as { pid: number; mallocArenaMax: string | null };
const pagesOf = (dir: string) => sqliteRows(join(dir, 'probe.sqlite'), 'SELECT query, page, rank FROM results ORDER BY query, page, rank');

describe('a run on a thread of its own', () => {
  test('webdata-etl run: the pipeline works off the main thread, on a heap of 1 GiB, or of WEBDATA_HEAP_MB', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const first = await cli(['run', PROBE.pathname, '--quiet'], { cwd: dir.dir, env: { ...envFor(sim.url), PROBE_DIR: dir.dir } });
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ status: 'completed', pages: { fetched: 20 } });
    expect(pagesOf(dir.dir)).toHaveLength((JSON.parse(first.stdout) as { items: { written: number } }).items.written);
    // The old generation's limit plus the young generation's (8 MB: V8 counts 12 with its new large-object space); the
    // main thread's is ~4 GB.
    expect(probeOf(dir.dir)).toEqual({ isMainThread: false, heapLimitMb: 1024 + 12 });
    const second = await cli(['run', PROBE.pathname, '--quiet', '--fresh'], { cwd: dir.dir, env: { ...envFor(sim.url), PROBE_DIR: dir.dir, WEBDATA_HEAP_MB: '256' } });
    expect(second.code, second.stderr).toBe(0);
    expect(probeOf(dir.dir)).toEqual({ isMainThread: false, heapLimitMb: 256 + 12 });
  });

  test('webdata-etl run by node: the same process again with one malloc arena (as the bin\'s shebang sets), each page paid once; a MALLOC_ARENA_MAX of the user\'s is kept', async () => {
    // Where glibc's arenas exist to be bounded (src/threads/one-malloc-arena.ts); elsewhere the process is left as started.
    const glibc = process.platform === 'linux' && typeof (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime === 'string';
    await using sim = await simulator();
    using dir = workdir();
    const started = startCli(['run', PROBE.pathname, '--quiet'], { cwd: dir.dir, env: { ...envFor(sim.url), PROBE_DIR: dir.dir } });
    const first = await started.done;
    expect(first.code, first.stderr).toBe(0);
    // In place: the same pid (a terminal's signals and a supervisor's wait reach the run), the Node flags kept (the
    // source condition this test's CLI is started with: the run found its pipeline and finished).
    const inherited = process.env.MALLOC_ARENA_MAX;
    expect(processOf(dir.dir)).toEqual({ pid: started.child.pid, mallocArenaMax: inherited ?? (glibc ? '1' : null) });
    // Restarted before anything was asked: 4 series × 5 pages, each requested once.
    expect(sim.stats().byStatus['200']).toBe(20);
    expect(pagesOf(dir.dir)).toHaveLength((JSON.parse(first.stdout) as { items: { written: number } }).items.written);
    const own = await cli(['run', PROBE.pathname, '--quiet', '--fresh'], { cwd: dir.dir, env: { ...envFor(sim.url), PROBE_DIR: dir.dir, MALLOC_ARENA_MAX: '4' } });
    expect(own.code, own.stderr).toBe(0);
    expect(processOf(dir.dir).mallocArenaMax).toBe('4');
  });

  test('webdata-etl run: every heap of the run grows 30 % past its live set before its next full collection, on the same 1 GiB ceiling; a --heap-growing-percent of the user\'s is kept', async () => {
    await using sim = await simulator();
    using dir = workdir();
    // V8's own trace of each full collection's factor (src/threads/heap-growth.ts), per isolate: `[pid:address:thread]
    // … [HeapController] factor 1.3 …`, thread 0 the main one. Without the setting: 1.6 for the run's thread (its
    // 1 GiB ceiling), 4.0 for what it allows outside its heap.
    const factors = async (nodeFlags: string[]) => {
      const result = await cli(['run', PROBE.pathname, '--quiet', '--fresh'], { cwd: dir.dir, env: { ...envFor(sim.url), PROBE_DIR: dir.dir, PROBE_GC: '1' }, nodeFlags: ['--expose-gc', '--trace-gc-verbose', ...nodeFlags] });
      expect(result.code, result.stderr).toBe(0);
      const found = [...result.stdout.matchAll(/^\[\d+:0x[0-9a-f]+:(\d+)\]\s+[\d.]+ ms: \[(?:HeapController|GlobalMemoryController)\] factor ([\d.]+) /gm)];
      // The probe's stage collected the run's thread's heap at each of its 20 pages.
      expect(found.filter(([, thread]) => thread !== '0').length).toBeGreaterThanOrEqual(20);
      return new Set(found.map(([, , factor]) => factor));
    };
    expect(await factors([])).toEqual(new Set(['1.3']));
    expect(probeOf(dir.dir)).toEqual({ isMainThread: false, heapLimitMb: 1024 + 12 });
    expect(await factors(['--heap-growing-percent=50'])).toEqual(new Set(['1.5']));
  });

  test('node <pipeline file>: the same, with the summary and exit code the main thread would give', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const result = await pipelineFile(PROBE.pathname, [], { cwd: dir.dir, env: { ...envFor(sim.url), PROBE_DIR: dir.dir } });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('thread-probe: completed');
    expect(probeOf(dir.dir)).toEqual({ isMainThread: false, heapLimitMb: 1024 + 12 });
    // Not restarted: the user's file had run already (its top level would run twice).
    expect(processOf(dir.dir).mallocArenaMax).toBe(process.env.MALLOC_ARENA_MAX ?? null);
    expect(pagesOf(dir.dir).length).toBeGreaterThan(150);
  });

  test('a file that hands its pipeline over unguarded runs it once on the thread; one whose pipeline the thread cannot find runs on the main thread', async () => {
    await using sim = await simulator();
    using handed = workdir();
    const once = await pipelineFile(new URL('../fixtures/thread-probe-handed.ts', import.meta.url).pathname, [], { cwd: handed.dir, env: { ...envFor(sim.url), PROBE_DIR: handed.dir } });
    expect(once.code, once.stderr).toBe(0);
    expect(probeOf(handed.dir).isMainThread).toBe(false);
    expect(sim.stats().byStatus['200']).toBe(20);
    using unfound = workdir();
    const here = await pipelineFile(new URL('../fixtures/thread-probe-unfound.ts', import.meta.url).pathname, [], { cwd: unfound.dir, env: { ...envFor(sim.url), PROBE_DIR: unfound.dir } });
    expect(here.code, here.stderr).toBe(0);
    expect(probeOf(unfound.dir).isMainThread).toBe(true);
    expect(sim.stats().byStatus['200']).toBe(40);
  });

  test('both signals reach the thread: the first stops, the second aborts what is in flight (exit 130)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, {}, { queries: ['a', 'b'], maxPages: 3 });
    // Every request is held by the simulator: only an abort can end the run while they are.
    const held = sim.park();
    const running = startCli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    await running.whileRunning(held.reached());
    running.child.kill('SIGINT');
    await running.printed('SIGINT: stopping');
    running.child.kill('SIGINT');
    await running.printed('SIGINT: aborting');
    const ended = await running.done;
    held.release();
    expect(ended.code).toBe(130);
    expect(JSON.parse(ended.stdout).status).toBe('interrupted');
  });

  test('a WEBDATA_HEAP_MB that is not a size is refused by name, before any request', async () => {
    await using sim = await simulator();
    using dir = workdir();
    for (const value of ['lots', '64', '1.5']) {
      const result = await cli(['run', PROBE.pathname], { cwd: dir.dir, env: { ...envFor(sim.url), PROBE_DIR: dir.dir, WEBDATA_HEAP_MB: value } });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`WEBDATA_HEAP_MB must be a whole number of megabytes from 128 to 65536 (the run's heap; default 1024); got "${value}"`);
    }
    expect(sim.stats().requests).toBe(0);
  });

  test('a pipeline that outgrows its heap is told so, keeps what it committed, and resumes with a larger one', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const env = { ...envFor(sim.url), PROBE_DIR: dir.dir };
    const failed = await cli(['run', PROBE.pathname, '--quiet'], { cwd: dir.dir, env: { ...env, PROBE_LEAK: '1', WEBDATA_HEAP_MB: '128' } });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('the run used up its heap (128 MB): a stage or sink keeps more than that in memory. What was committed is kept; set WEBDATA_HEAP_MB higher');
    expect(pagesOf(dir.dir).length).toBeLessThan(100);
    const resumed = await cli(['run', PROBE.pathname], { cwd: dir.dir, env });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ status: 'completed' });
    // Every row once, as one uninterrupted run writes them: what was committed before the thread ended stayed.
    using reference = workdir();
    expect((await cli(['run', PROBE.pathname], { cwd: reference.dir, env: { ...env, PROBE_DIR: reference.dir } })).code).toBe(0);
    expect(pagesOf(dir.dir)).toEqual(pagesOf(reference.dir));
  });
});

describe('run(url) in a host program', () => {
  // The thread sees the host's environment, as the module would on the main thread.
  afterEach(() => vi.unstubAllEnvs());

  test('runs the module\'s pipeline on a thread of its own; events and the summary come back', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const events: string[] = [];
    vi.stubEnv('PROBE_DIR', dir.dir);
    const summary = await run(PROBE, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, onEvent: (event) => events.push(event.type) });
    expect(summary).toMatchObject({ pipeline: 'thread-probe', status: 'completed', pages: { fetched: 20 } });
    expect(pagesOf(dir.dir)).toHaveLength(summary.items.written);
    expect(events.filter((type) => type === 'page')).toHaveLength(20);
    expect(events[0]).toBe('start');
    expect(probeOf(dir.dir)).toEqual({ isMainThread: false, heapLimitMb: 1024 + 12 });
  });

  test('a stop signal crosses to the thread; errors come back of their own class', async () => {
    await using sim = await simulator();
    using dir = workdir();
    vi.stubEnv('PROBE_DIR', dir.dir);
    const stopped = await run(PROBE, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, signal: AbortSignal.abort() });
    expect(stopped.status).toBe('interrupted');
    expect(sim.stats().requests).toBe(0);

    const invalid = await rejection(run(PROBE, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, budget: 5 as never, resume: true }));
    expect(invalid).toBeInstanceOf(ValidationError);
    expect(invalid.message).toContain('budget');
    const missing = await rejection(run(new URL('./no-such-pipeline.ts', PROBE), { baseUrl: sim.url, apiKey: TEST_KEY }));
    expect(missing).toBeInstanceOf(UsageError);
    expect(missing.message).toContain('no such file');
    const client = await rejection(run(PROBE, { client: {} as never }));
    expect(client.message).toContain('`client` and `clock` cannot cross to the run\'s thread');
    expect(sim.stats().requests).toBe(0);
  });
});

describe('an error crossing from the run\'s thread', () => {
  test('keeps its class name, message and JSON fields; a field JSON cannot hold does not lose the error', () => {
    const plain = postedError(Object.assign(new ValidationError('Invalid run options', [{ path: 'budget', message: 'must be an object' }])));
    expect(plain).toMatchObject({ name: 'ValidationError', message: expect.stringContaining('budget'), fields: { issues: [{ path: 'budget', message: 'must be an object' }] } });
    expect(postedError(Object.assign(new Error('odd'), { size: 10n }))).toMatchObject({ name: 'Error', message: 'odd', fields: {} });
    expect(postedError('a string')).toEqual({ name: 'Error', message: 'a string', fields: {} });
  });
});
