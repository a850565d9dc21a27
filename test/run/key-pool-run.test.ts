// A run with a pool of keys from the environment (docs/pipelines.md#a-pool-of-keys): from the command line, over real
// sockets, against a simulator that holds the keys with limits and states of their own.
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import { cli, config } from '../cli-helpers.ts';
import { noKeyIn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const KEYS = { fast: 'sk_fast_1a2b3c4d5e6f7a8b', slow: 'sk_slow_9f8e7d6c5b4a3f2e', spare: 'sk_spare_0a1b2c3d4e5f6a7b' };
const POOL = `fast=${KEYS.fast}\nslow=${KEYS.slow}\nspare=${KEYS.spare}\n`;

describe('a run with a pool of keys', () => {
  it('WEBDATA_API_KEYS: every key sends (each at its own limit), the rows are those of one key alone, and no key is written anywhere', async () => {
    await using sim = await startSimulator({
      keys: [
        { key: KEYS.fast, name: 'fast', ratePerSecond: 20, burst: 4 },
        { key: KEYS.slow, name: 'slow', ratePerSecond: 5, burst: 2 },
        { key: KEYS.spare, name: 'spare', ratePerSecond: 5, burst: 2 },
      ],
    });
    using dir = workdir();
    const search = { queries: ['espresso', 'kettle', 'grinder', 'scale'], countries: ['us', 'gb', 'de'], maxPages: 3 };
    const file = config(dir.dir, { rate: { requestsPerSecond: 20, concurrency: 3 }, keys: { slow: { requestsPerSecond: 5 }, spare: { requestsPerSecond: 5 } } }, search);
    const result = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('3 keys from WEBDATA_API_KEYS (fast, slow, spare)');
    const byKey = (name: string) => sim.log().filter((entry) => entry.key === name && entry.status === 200).length;
    expect(byKey('fast')).toBeGreaterThan(0);
    expect(byKey('slow')).toBeGreaterThan(0);
    expect(byKey('spare')).toBeGreaterThan(0);
    // The faster key took the larger part of the work.
    expect(byKey('fast')).toBeGreaterThan(byKey('slow'));
    const summary = JSON.parse(result.stdout) as { status: string; pages: { fetched: number } };
    expect(summary.status).toBe('completed');
    expect(byKey('fast') + byKey('slow') + byKey('spare')).toBe(summary.pages.fetched);
    expect(sqliteRows(dir.path('out/results.sqlite'), 'SELECT count(*) AS n FROM results')[0]?.n).toBeGreaterThan(0);
    noKeyIn(dir.dir, result.stdout + result.stderr, Object.values(KEYS));
  });

  it('a key revoked: retired at its first 401, the others deliver every row, exit 0', async () => {
    await using reference = await startSimulator({ keys: [{ key: KEYS.fast, name: 'fast' }] });
    await using sim = await startSimulator({
      keys: [
        { key: KEYS.fast, name: 'fast' },
        { key: KEYS.slow, name: 'slow', status: 'revoked' },
      ],
    });
    using dir = workdir();
    const search = { queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 2 };
    const alone = await cli(['run', config(dir.dir, { name: 'alone', sinks: [{ type: 'sqlite', path: 'ref/results.sqlite' }] }, search)], {
      cwd: dir.dir,
      env: { WEBDATA_BASE_URL: reference.url, WEBDATA_API_KEY: KEYS.fast },
    });
    expect(alone.code, alone.stderr).toBe(0);
    const file = config(dir.dir, { rate: { concurrency: 2 }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }] }, search);
    const result = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: `fast=${KEYS.fast},slow=${KEYS.slow}` } });
    expect(result.code, result.stderr).toBe(0);
    expect(sim.log().filter((entry) => entry.key === 'slow' && entry.status === 401).length).toBeLessThanOrEqual(2);
    const rows = (path: string) => sqliteRows(dir.path(path), 'SELECT query, country, page, position, url FROM results ORDER BY query, country, page, position');
    expect(rows('out/results.sqlite')).toEqual(rows('ref/results.sqlite'));
    noKeyIn(dir.dir, result.stdout + result.stderr, Object.values(KEYS));
  });

  it('before any request: a setting for a label the environment does not hold, and a keys file others can read (exit 2)', async () => {
    await using sim = await startSimulator({ keys: [{ key: KEYS.fast, name: 'fast' }] });
    using dir = workdir();
    const mistyped = await cli(['run', config(dir.dir, { keys: { fsat: { concurrency: 2 } } })], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: `fast=${KEYS.fast}` } });
    expect(mistyped.code).toBe(2);
    expect(mistyped.stderr).toContain('keys.fsat: no key is labelled "fsat": WEBDATA_API_KEYS holds "fast"');
    // The keys file lives apart from the outputs, which are searched for the keys.
    using secrets = workdir();
    writeFileSync(secrets.path('keys'), `fast=${KEYS.fast}\n`, { mode: 0o644 });
    const open = await cli(['run', config(dir.dir)], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS_FILE: secrets.path('keys') } });
    expect(open.code).toBe(2);
    expect(open.stderr).toContain(`WEBDATA_API_KEYS_FILE: ${secrets.path('keys')} is readable or writable by others (mode 644)`);
    expect(sim.stats().requests).toBe(0);
    noKeyIn(dir.dir, mistyped.stdout + mistyped.stderr + open.stdout + open.stderr, Object.values(KEYS));
  });
});
