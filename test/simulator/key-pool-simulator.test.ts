import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';

/**
 * The simulator with a pool of keys (issue 40, item 7): each key answered by its own plan — its token bucket, its
 * credit balance, its revocation — whatever the others do. Real sockets; the simulator's clock is the test's, so a
 * rate limit needs no waiting.
 */
const KEYS = { fast: 'sim_fast_0123456789abcdef', slow: 'sim_slow_0123456789abcdef', doomed: 'sim_doomed_0123456789abc' };

describe('a simulator with several keys', () => {
  it('answers each key by its own rate, burst, credits and revocation: 429, 402 and 401 for that key alone', async () => {
    let now = 0;
    await using sim = await startSimulator({
      clock: () => now,
      keys: [
        { key: KEYS.fast, name: 'fast', ratePerSecond: 8, burst: 2 },
        { key: KEYS.slow, name: 'slow', ratePerSecond: 2, burst: 1, credits: 2 },
        { key: KEYS.doomed, name: 'doomed', ratePerSecond: 100, burst: 10, revokeAfter: 3 },
      ],
    });
    const status = async (key: keyof typeof KEYS, q = 'pool') => {
      const res = await fetch(`${sim.url}/searchengine/search?q=${q}`, { headers: { 'x-api-key': KEYS[key] } });
      await res.arrayBuffer();
      return { status: res.status, retryAfter: res.headers.get('retry-after') };
    };

    // Each key's burst is its own: fast's two, slow's one; slow's 429 leaves fast's bucket whole, and the reverse.
    expect((await status('slow')).status).toBe(200);
    expect(await status('slow')).toEqual({ status: 429, retryAfter: '1' });
    expect((await status('fast')).status).toBe(200);
    expect((await status('fast')).status).toBe(200);
    expect((await status('fast')).status).toBe(429);
    expect((await status('doomed')).status).toBe(200);

    // A quarter of a second: fast has earned two more (8 r/s), slow not yet one (2 r/s).
    now = 250;
    expect((await status('fast')).status).toBe(200);
    expect((await status('fast')).status).toBe(200);
    expect((await status('fast')).status).toBe(429);
    expect((await status('slow')).status).toBe(429);

    // slow's credits (2) run out after its second answer: 402 for slow, while fast goes on.
    now = 1000;
    expect((await status('slow')).status).toBe(200);
    now = 2000;
    expect((await status('slow')).status).toBe(402);
    expect((await status('fast')).status).toBe(200);

    // doomed is revoked after three admitted requests: 401 from the fourth on, for it alone.
    expect((await status('doomed')).status).toBe(200);
    expect((await status('doomed')).status).toBe(200);
    expect((await status('doomed')).status).toBe(401);
    expect((await status('doomed')).status).toBe(401);
    expect((await status('fast')).status).toBe(200);

    const byKey = (name: string) => sim.log().filter((entry) => entry.key === name).map((entry) => entry.status);
    expect(byKey('fast')).toEqual([200, 200, 429, 200, 200, 429, 200, 200]);
    expect(byKey('slow')).toEqual([200, 429, 429, 200, 402]);
    expect(byKey('doomed')).toEqual([200, 200, 200, 401, 401]);
    expect(sim.stats().credits).toEqual({
      fast: { debited: 6, remaining: null },
      slow: { debited: 2, remaining: 0 },
      doomed: { debited: 3, remaining: null },
    });
  });

  it('revokeAfter: 0 refuses a key from its first request; credits added mid-run bring a key back from 402', async () => {
    await using sim = await startSimulator({
      keys: [
        { key: KEYS.fast, name: 'fast', credits: 1 },
        { key: KEYS.doomed, name: 'doomed', revokeAfter: 0 },
      ],
    });
    const status = async (key: keyof typeof KEYS) => (await fetch(`${sim.url}/searchengine/search?q=x`, { headers: { 'x-api-key': KEYS[key] } })).status;
    expect(await status('doomed')).toBe(401);
    expect(await status('fast')).toBe(200);
    expect(await status('fast')).toBe(402);
    sim.updateKey('fast', { credits: 2 });
    expect(await status('fast')).toBe(200);
    expect(await status('doomed')).toBe(401);
  });

  it('refuses a negative or fractional revokeAfter, naming the key’s field', async () => {
    for (const revokeAfter of [-1, 1.5]) {
      await expect(startSimulator({ keys: [{ key: KEYS.fast, name: 'fast', revokeAfter }] })).rejects.toThrow(/keys\.0\.revokeAfter/);
    }
  });
});
