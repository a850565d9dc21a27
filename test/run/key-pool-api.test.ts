// A pool of keys from the program's side (docs/pipelines.md#a-pool-of-keys): run() and stream() read the keys from
// their `env` (process.env by default) as the command line does, and a pipeline file run by node gets them too.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, run, searchPages, stream, toSqlite } from '../../src/index.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { pipelineFile } from '../cli-helpers.ts';
import { noKeyIn, workdir } from '../pipeline-helpers.ts';

const ROOT = join(import.meta.dirname, '../..');
const KEYS = { main: 'sk_api_main_4a5b6c7d8e9f0a1b', spare: 'sk_api_spare_2c3d4e5f6a7b8c9d' };
const POOL = `main=${KEYS.main},spare=${KEYS.spare}`;

const twoKeys = () =>
  startSimulator({
    seed: 9,
    keys: [
      { key: KEYS.main, name: 'main', ratePerSecond: 50, burst: 5 },
      { key: KEYS.spare, name: 'spare', ratePerSecond: 50, burst: 5 },
    ],
  });

const pipeline = (dir: string, name: string) =>
  definePipeline({
    name,
    source: searchPages({ queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 3 }),
    stages: [normalize()],
    sinks: [toSqlite({ path: `${dir}/${name}.sqlite` })],
    rate: { requestsPerSecond: 20, concurrency: 2 },
    keys: { spare: { requestsPerSecond: 10 } },
  });

describe('a pool of keys from run(), stream() and a pipeline file', () => {
  it('run() with WEBDATA_API_KEYS in its env: both keys send, the summary has each', async () => {
    await using sim = await twoKeys();
    using dir = workdir();
    const summary = await run(pipeline(dir.dir, 'programmatic'), { env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } });
    expect(summary.status).toBe('completed');
    expect(summary.keys?.map((key) => key.label)).toEqual(['main', 'spare']);
    for (const key of summary.keys ?? []) {
      expect(key.requests, key.label).toBe(sim.log().filter((entry) => entry.key === key.label).length);
      expect(key.requests, key.label).toBeGreaterThan(0);
    }
    noKeyIn(dir.dir, JSON.stringify(summary), Object.values(KEYS));
  });

  it('stream() with the pool: every page yielded once, sent with both keys', async () => {
    await using sim = await twoKeys();
    using dir = workdir();
    const pages = stream(pipeline(dir.dir, 'streamed'), { env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } });
    let count = 0;
    for await (const page of pages) count += page.items.length > 0 ? 1 : 0;
    const summary = await pages.summary();
    expect(summary.status).toBe('completed');
    expect(count).toBe(summary.pages.fetched);
    expect(new Set(sim.log().map((entry) => entry.key))).toEqual(new Set(['main', 'spare']));
  });

  it('node <pipeline file> with WEBDATA_API_KEYS in the environment runs with the pool', async () => {
    await using sim = await twoKeys();
    using dir = workdir();
    const result = await pipelineFile(join(ROOT, 'pipelines/rank-tracking.ts'), ['--quiet'], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } });
    expect(result.code, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout) as { status: string; keys?: { label: string; requests: number }[] };
    expect(summary.status).toBe('completed');
    expect(summary.keys?.map((key) => key.label)).toEqual(['main', 'spare']);
    expect(new Set(sim.log().map((entry) => entry.key))).toEqual(new Set(['main', 'spare']));
    noKeyIn(dir.dir, result.stdout + result.stderr, Object.values(KEYS));
  });
});
