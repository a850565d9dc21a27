// Limits remembered in a distributed run (docs/pipelines.md#limits-remembered): every worker starts its keys where the
// state schema remembers them, and the worker that leads at the end keeps what the run learned. Two workers from the
// command line, over real sockets, on a real PostgreSQL cluster, against a simulator whose keys' limits the runs are
// not told.
import { expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import { cli, config } from '../cli-helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

const KEYS = { a: 'sk_fleet_a_0c1d2e3f4a5b6c7d', b: 'sk_fleet_b_8e9f0a1b2c3d4e5f' };
const POOL = `a=${KEYS.a}\nb=${KEYS.b}\n`;
/** 96 pages a run: the first's discovery of both keys' limits (configured at 24 a second) is over within them. */
const SEARCH = { queries: Array.from({ length: 12 }, (_, i) => `query ${i}`), countries: ['us', 'gb'], maxPages: 4 };

describePostgres('limits remembered by a distributed run', () => {
  it("the fleet's second run, of another pipeline with the same keys, starts where the first learned: a few 429s a key where the first paid a discovery", async () => {
    await using sim = await startSimulator({
      seed: 5,
      latencyMs: { min: 5, max: 15 },
      keys: [
        { key: KEYS.a, name: 'a', ratePerSecond: 8, burst: 2 },
        { key: KEYS.b, name: 'b', ratePerSecond: 4, burst: 2 },
      ],
    });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const fleet = async (name: string) => {
        const file = config(dir.dir, { name, sinks: [{ type: 'postgres', table: name, url: db.url }], state: { url: db.url }, rate: { requestsPerSecond: 24, concurrency: 2 } }, SEARCH);
        const before = sim.log().length;
        const results = await Promise.all([1, 2].map(() => cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } })));
        for (const result of results) expect(result.code, result.stderr).toBe(0);
        const log = sim.log().slice(before);
        return { limited: (key: string) => log.filter((entry) => entry.key === key && entry.status === 429).length, printed: results.map((r) => r.stdout + r.stderr).join('\n') };
      };
      const first = await fleet('first');
      // The first run learns each key's limit: it pays for it.
      expect(first.limited('a') + first.limited('b')).toBeGreaterThan(0);
      const remembered = await sql(db.url, 'SELECT fingerprint, rate FROM webdata.key_limits ORDER BY rate DESC');
      expect(remembered).toHaveLength(2);
      // What the leader's rate controller knew: under each key's limit or near it, not within it as one process knows
      // it: the leader hears the other worker's answers in batches, late. Measured over ten runs: a's (limit 8) 3.9 to
      // 8.3, b's (limit 4) 1.1 to 6.4 (the lowest rate that failed twice the limit in two runs of four, before the end
      // rate bounded the guess). Under the limit, the next run is slower, not refused.
      expect(Number(remembered[0]?.rate)).toBeGreaterThan(0);
      expect(Number(remembered[0]?.rate)).toBeLessThan(8.8);
      expect(Number(remembered[1]?.rate)).toBeGreaterThan(0);
      expect(Number(remembered[1]?.rate)).toBeLessThan(7);

      const second = await fleet('second');
      // Measured over 12 runs: the first 7 to 15 429s a key, the second 0 to 3 (one process, or one worker alone: at most
      // one). A fleet's second run at one 429 is issue 43's aim.
      expect(second.limited('a')).toBeLessThanOrEqual(3);
      expect(second.limited('b')).toBeLessThanOrEqual(3);
      expect(second.limited('a') + second.limited('b')).toBeLessThan(first.limited('a') + first.limited('b'));
      // Known by fingerprint alone: no key in any row of the schema's memory, nor in what the workers printed.
      const everything = JSON.stringify(await sql(db.url, 'SELECT * FROM webdata.key_limits')) + JSON.stringify(await sql(db.url, 'SELECT * FROM webdata.meta'));
      for (const key of Object.values(KEYS)) {
        expect(everything).not.toContain(key);
        expect(first.printed + second.printed).not.toContain(key);
      }
    } finally {
      await db.drop();
    }
  });
});
