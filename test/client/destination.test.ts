import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, searchPages, toSqlite } from '../../src/index.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

const small = { queries: ['x'], countries: ['us'], maxPages: 1 };

describe('where the key goes', () => {
  it('the destination and who chose it are shown before the first request and kept in the summary', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const origin = new URL(sim.url).origin;
    const file = config(dir.dir, { api: { baseUrl: sim.url } }, small);
    const fromFile = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_API_KEY: TEST_KEY } });
    expect(fromFile.code).toBe(0);
    // Named as the command was given it.
    const name = file;
    expect(fromFile.stderr.split('\n')[0]).toContain(`key from WEBDATA_API_KEY → ${origin} (from ${name})`);
    expect(JSON.parse(fromFile.stdout).destination).toEqual({ origin, from: name, credentials: 'key from WEBDATA_API_KEY' });

    const fromEnv = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(JSON.parse(fromEnv.stdout).destination.from).toBe('WEBDATA_BASE_URL');
    const fromFlag = await cli(['run', file, '--base-url', sim.url], { cwd: dir.dir, env: envFor('https://unused.example/api/v1') });
    expect(JSON.parse(fromFlag.stdout).destination.from).toBe('--base-url');
  });

  it('2: WEBDATA_ALLOWED_HOSTS refuses any other host before a request; the simulator is not held to it', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { api: { baseUrl: sim.url } }, small);
    const env = { WEBDATA_API_KEY: TEST_KEY, WEBDATA_ALLOWED_HOSTS: 'api.example.com, other.example' };
    const refused = await cli(['run', file], { cwd: dir.dir, env });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('api.baseUrl');
    expect(refused.stderr).toContain('WEBDATA_ALLOWED_HOSTS (api.example.com, other.example)');
    expect(sim.stats().requests).toBe(0);

    expect((await cli(['run', file], { cwd: dir.dir, env: { ...env, WEBDATA_ALLOWED_HOSTS: '127.0.0.1' } })).code).toBe(0);
    const simulated = await cli(['run', file, '--simulator', '--fresh'], { cwd: dir.dir, env });
    expect(simulated.code).toBe(0);
    expect(JSON.parse(simulated.stdout).destination).toMatchObject({ from: '--simulator', credentials: 'key from the built-in simulator' });
  });

  it('plain http only to loopback: localhost and *.localhost go to 127.0.0.1 without asking DNS', async () => {
    await using sim = await simulator();
    using dir = workdir();
    for (const host of ['localhost', 'webdata-test.localhost']) {
      const summary = await runOn(
        sim,
        definePipeline({
          name: `pinned-${host}`,
          source: searchPages(small),
          stages: [normalize()],
          sinks: [toSqlite({ path: dir.path(`${host}.sqlite`) })],
        }),
        { baseUrl: `http://${host}:${sim.port}/api/v1` },
      );
      expect([host, summary.status, summary.destination.origin]).toEqual([host, 'completed', `http://${host}:${sim.port}`]);
    }
    expect(sim.stats().requests).toBe(2);
  });
});
