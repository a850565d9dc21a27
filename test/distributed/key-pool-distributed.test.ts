// A pool of keys in a distributed run (docs/distributed.md#a-pool-of-keys-across-workers): two workers, from the command
// line, over real sockets, on a real PostgreSQL cluster, against a simulator that holds the keys with limits of their own.
import { expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import { cli, config, startCli } from '../cli-helpers.ts';
import { filesHolding, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

const KEYS = { a: 'sk_pool_a_1a2b3c4d5e6f7a8b', b: 'sk_pool_b_9f8e7d6c5b4a3f2e' };
const POOL = `a=${KEYS.a}\nb=${KEYS.b}\n`;
const SEARCH = { queries: Array.from({ length: 12 }, (_, i) => `query ${i}`), countries: ['us', 'gb'], maxPages: 4 };

describePostgres('a pool of keys shared by the workers of a distributed run', () => {
  it("each key's limit and share hold across two workers: its own shared row paces it, both keys send, the run's budget is spent to the credit", async () => {
    // Key a at 10 a second, b at 5; the pipeline paces a at 8 and b at 4 (under each, whoever sends). Two workers each
    // pacing its keys alone would send 16 and 8 a second, and meet 429s at once.
    await using sim = await startSimulator({
      seed: 7,
      latencyMs: { min: 5, max: 15 },
      keys: [
        { key: KEYS.a, name: 'a', ratePerSecond: 10, burst: 2 },
        { key: KEYS.b, name: 'b', ratePerSecond: 5, burst: 2 },
      ],
    });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(
        dir.dir,
        {
          name: 'pooled',
          sinks: [{ type: 'postgres', table: 'results', url: db.url }],
          state: { url: db.url },
          rate: { requestsPerSecond: 8, concurrency: 2 },
          keys: { b: { requestsPerSecond: 4, maxCredits: 12 } },
          budget: { maxCredits: 60 },
        },
        SEARCH,
      );
      const env = { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL };
      const results = await Promise.all([1, 2].map(() => cli(['run', file], { cwd: dir.dir, env })));
      const runIds = new Set<string>();
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        const summary = JSON.parse(result.stdout) as { status: string; runId: string };
        expect(summary.status, result.stderr).toBe('budget');
        runIds.add(summary.runId);
        expect(result.stderr).toContain('2 keys from WEBDATA_API_KEYS (a, b)');
      }
      expect(runIds.size).toBe(1);
      const credits = sim.stats().credits;
      // The run's budget across both keys and both workers, to the credit; b's share, to the credit.
      expect((credits.a?.debited ?? 0) + (credits.b?.debited ?? 0)).toBe(60);
      expect(credits.b?.debited).toBe(12);
      expect(credits.a?.debited).toBe(48);
      // Each key's limit held across the fleet: each key paced by its own row, under its own limit.
      const limited = (name: string) => sim.log().filter((entry) => entry.key === name && entry.status === 429).length;
      expect(limited('a')).toBeLessThanOrEqual(2);
      expect(limited('b')).toBeLessThanOrEqual(2);
      // Both workers took slots from each key's row; no key's row holds a key.
      const rows = await sql(db.url, 'SELECT label, interval_ms, max_credits, spent, reserved, accepted FROM webdata.run_key_limits ORDER BY label');
      expect(rows.map((row) => row.label)).toEqual(['a', 'b']);
      expect(rows[1]).toMatchObject({ max_credits: 12, spent: 12, reserved: 0 });
      // Each row paced at its key's rate at most (the leader may have slowed it since, from the answers).
      expect(Number(rows[0]?.interval_ms)).toBeGreaterThanOrEqual(1000 / (8 * 0.99) - 0.001);
      expect(Number(rows[1]?.interval_ms)).toBeGreaterThanOrEqual(1000 / (4 * 0.99) - 0.001);
      expect(rows.every((row) => Number(row.accepted) > 0)).toBe(true);
      const everything = JSON.stringify(await sql(db.url, 'SELECT * FROM webdata.run_key_limits')) + JSON.stringify(await sql(db.url, 'SELECT * FROM webdata.run_limits'));
      for (const key of Object.values(KEYS)) expect(everything).not.toContain(key);
      for (const result of results) for (const key of Object.values(KEYS)) expect(result.stdout + result.stderr).not.toContain(key);
      for (const key of Object.values(KEYS)) expect(filesHolding(dir.dir, key)).toEqual([]);
    } finally {
      await db.drop();
    }
  });

  it('a key revoked mid-run: retired by the worker that met its 401 and, through its row, by the other; the run completes (exit 0) on the other key', async () => {
    await using sim = await startSimulator({
      seed: 11,
      // Every answer takes 150 to 200 ms: what a worker sends with b while its retirement is told is bounded by its
      // requests in flight, not by how fast b answers.
      latencyMs: { min: 150, max: 200 },
      keys: [
        { key: KEYS.a, name: 'a' },
        { key: KEYS.b, name: 'b' },
      ],
    });
    // b's ninth request answers 401 (revoked); b answers the others as before (nobody else was told).
    sim.inject({ fault: 'status', status: 401, match: { key: 'b' }, after: 8, times: 1 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, { name: 'revoked', sinks: [{ type: 'postgres', table: 'results', url: db.url }], state: { url: db.url }, rate: { concurrency: 2 } }, SEARCH);
      const env = { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL };
      const results = await Promise.all([1, 2].map(() => cli(['run', file], { cwd: dir.dir, env })));
      let pages = 0;
      for (const result of results) {
        expect(result.code, result.stderr).toBe(0);
        const summary = JSON.parse(result.stdout) as { status: string; worker?: { pages: number } };
        expect(summary.status).toBe('completed');
        pages += summary.worker?.pages ?? 0;
      }
      const log = sim.log().filter((entry) => entry.path.includes('search'));
      // Every page the server answered was committed once, and every series ended complete.
      expect(pages).toBe(log.filter((entry) => entry.status === 200).length);
      const series = await sql(db.url, "SELECT count(*)::int AS n FROM webdata.series WHERE status = 'ended' AND reason <> 'failed'");
      expect(series).toEqual([{ n: SEARCH.queries.length * SEARCH.countries.length }]);
      const revokedAt = log.findIndex((entry) => entry.key === 'b' && entry.status === 401);
      expect(revokedAt).toBeGreaterThan(0);
      // After the 401, b is sent only what was already on its way: each worker's b requests in flight (2), never the
      // rest of the run (one worker retiring b alone would leave the other sending about half its pages with it).
      const afterwards = log.slice(revokedAt + 1).filter((entry) => entry.key === 'b');
      expect(afterwards.length).toBeLessThanOrEqual(3);
      expect(log.slice(revokedAt + 1).filter((entry) => entry.key === 'a').length).toBeGreaterThan(40);
      const [row] = await sql(db.url, "SELECT retired_reason, retired_at IS NOT NULL AS dated FROM webdata.run_key_limits WHERE label = 'b'");
      expect(row).toEqual({ retired_reason: 'unauthorized', dated: true });
      const [stop] = await sql(db.url, 'SELECT stop_reason FROM webdata.run_limits');
      expect(stop).toEqual({ stop_reason: null });
      // status shows each key's shared row: b retired for the run, a at work.
      const status = await cli(['status', file, '--json'], { cwd: dir.dir, env: {} });
      expect(status.code, status.stderr).toBe(0);
      const report = JSON.parse(status.stdout) as { keys: { label: string; retired: { reason: string; path: string | null }[] }[] };
      expect(report.keys.map((key) => [key.label, key.retired.map((r) => [r.reason, r.path])])).toEqual([
        ['a', []],
        ['b', [['unauthorized', null]]],
      ]);
      const text = await cli(['status', file], { cwd: dir.dir, env: {} });
      expect(text.stdout).toMatch(/^keys: a {2}rate unpaced$/m);
      expect(text.stdout).toMatch(/^ {6}b {2}rate unpaced, retired \(unauthorized: .+\)$/m);
      const rows = JSON.stringify(await sql(db.url, 'SELECT * FROM webdata.run_key_limits'));
      for (const key of Object.values(KEYS)) expect(status.stdout + text.stdout + rows).not.toContain(key);
    } finally {
      await db.drop();
    }
  });

  it('a worker holding another key under a label of the run is refused before it sends anything (exit 2, naming the label); the run goes on', async () => {
    const stranger = 'sk_pool_x_5a4b3c2d1e0f9a8b';
    await using sim = await startSimulator({
      keys: [
        { key: KEYS.a, name: 'a' },
        { key: KEYS.b, name: 'b' },
        { key: stranger, name: 'x' },
      ],
    });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, { name: 'labelled', sinks: [{ type: 'postgres', table: 'results', url: db.url }], state: { url: db.url }, rate: { concurrency: 2 } }, SEARCH);
      // Every request is held: the run stays at work, and whatever the refused worker sent would be held here too.
      const gate = sim.park();
      const working = startCli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } });
      await working.whileRunning(gate.reached(2));
      const refused = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: `a=${KEYS.a}\nb=${stranger}\n` } });
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toContain('WEBDATA_API_KEYS (b)');
      expect(refused.stderr).toContain('another key under the label "b"');
      for (const key of [...Object.values(KEYS), stranger]) expect(refused.stdout + refused.stderr).not.toContain(key);
      // The same keys under the same labels join.
      const joining = startCli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } });
      await joining.printed('joined run');
      gate.release();
      for (const worker of [working, joining]) {
        const done = await worker.done;
        expect(done.code, done.stderr).toBe(0);
      }
      expect(sim.log().filter((entry) => entry.key === 'x')).toEqual([]);
    } finally {
      await db.drop();
    }
  });
});
