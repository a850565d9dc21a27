// A run nobody observes with OpenTelemetry (no SDK registered, no --metrics or --otlp) does not load its API: 50-odd
// modules of a worker's start-up (docs/benchmarks.md's start-up). Over a real simulator, in a child process whose
// every package loaded is recorded (test/fixtures/record-loads.ts); the same run with something registered loads it.
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, config, envFor } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { runChild } from '../run/resume-helpers.ts';

const RECORD = resolve(import.meta.dirname, '../fixtures/record-loads.ts');

async function loadedBy(registered: boolean) {
  await using sim = await simulator({ seed: 3 });
  using dir = workdir();
  const result = await runChild(
    { baseUrl: sim.url, dir: dir.dir, queries: ['espresso', 'kettle'], countries: ['us'], maxPages: 2, sinks: ['sqlite'] },
    { NODE_OPTIONS: `--import=${RECORD}`, ...(registered ? { WEBDATA_TEST_OTEL_REGISTERED: '1' } : {}) },
  ).done;
  expect(result.code).toBe(0);
  expect(result.summary).toMatchObject({ status: 'completed', pages: { fetched: 4 } });
  // One line a thread: the process's, and the run's own.
  const lines = result.stderr.split('\n').filter((each) => each.startsWith('LOADED '));
  expect(lines.length).toBeGreaterThanOrEqual(2);
  return lines.flatMap((line) => JSON.parse(line.replace(/^LOADED \d+ /, '')) as string[]);
}

describe('OpenTelemetry in a run', () => {
  it('a run with nothing registered with OpenTelemetry completes without loading its API', async () => {
    const loaded = await loadedBy(false);
    expect(loaded).toContain('zod');
    expect(loaded).not.toContain('@opentelemetry/api');
  });

  it('the same run with something registered loads it (the recording sees what the run loads)', async () => {
    expect(await loadedBy(true)).toContain('@opentelemetry/api');
  });

  it('the command line run against an API (no --simulator) loads neither the simulator nor OpenTelemetry; with --simulator, the simulator', async () => {
    await using sim = await simulator({ seed: 3 });
    using dir = workdir();
    const loadedIn = async (args: string[], env: Record<string, string>) => {
      const result = await cli(['run', config(dir.dir, {}, { queries: ['x'], countries: ['us'], maxPages: 1 }), ...args], { cwd: dir.dir, env: { ...env, NODE_OPTIONS: `--import=${RECORD}` } });
      expect(result.code, result.stderr).toBe(0);
      return result.stderr.split('\n').filter((line) => line.startsWith('LOADED ')).flatMap((line) => JSON.parse(line.replace(/^LOADED \d+ /, '')) as string[]);
    };
    const plain = await loadedIn([], envFor(sim.url));
    expect(plain).toContain('zod');
    expect(plain).not.toContain('webdata-etl/simulator');
    expect(plain).not.toContain('@opentelemetry/api');
    expect(await loadedIn(['--simulator', '--fresh'], {})).toContain('webdata-etl/simulator');
  });
});
