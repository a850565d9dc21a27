// Limits remembered between runs (docs/scheduler.md#a-remembered-start): what a key learned of a limit the run is not
// told is kept in the state store by the key's fingerprint, and the next run of any pipeline with that key in that
// database starts there. From the command line, over real sockets, against a simulator holding the keys; SQLite state,
// then PostgreSQL's.
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import { cli, config, startCli } from '../cli-helpers.ts';
import { noKeyIn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

const KEYS = { learner: 'sk_learner_4f3e2d1c0b9a8f7e', other: 'sk_other_7a6b5c4d3e2f1a0b' };
/** 50 pages a run: the first's discovery of a limit of 10 a second (configured at 24) is over within them. */
const SEARCH = { queries: ['espresso', 'kettle', 'grinder', 'scale', 'filter'], countries: ['us', 'gb'], maxPages: 5 };

/** A simulator whose keys each allow 10 requests a second (burst 2), and runs of pipelines named `name` with `key`. */
async function bench(state: Record<string, unknown>) {
  const sim = await startSimulator({
    keys: [
      { key: KEYS.learner, name: 'learner', ratePerSecond: 10, burst: 2 },
      { key: KEYS.other, name: 'other', ratePerSecond: 10, burst: 2 },
    ],
  });
  const dir = workdir();
  const pipeline = (name: string) => config(dir.dir, { name, state, rate: { requestsPerSecond: 24, concurrency: 3 }, sinks: [{ type: 'csv', path: `out/${name}.csv` }] }, SEARCH);
  /** A run of pipeline `name` with one key, or with a pool (`WEBDATA_API_KEYS`, as given). */
  const run = async (name: string, key: keyof typeof KEYS | { pool: string }) => {
    const before = sim.log().length;
    const file = pipeline(name);
    const credentials: Record<string, string> = typeof key === 'string' ? { WEBDATA_API_KEY: KEYS[key] } : { WEBDATA_API_KEYS: key.pool };
    const result = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, ...credentials } });
    expect(result.code, result.stderr).toBe(0);
    const log = sim.log().slice(before);
    const count = (status: number, name?: string) => log.filter((entry) => entry.status === status && (name === undefined || entry.key === name)).length;
    return { result, rateLimited: count(429), accepted: count(200), rateLimitedOf: (name: string) => count(429, name) };
  };
  return {
    sim,
    dir,
    pipeline,
    run,
    async [Symbol.asyncDispose]() {
      dir[Symbol.dispose]();
      await sim.close();
    },
  };
}

describe('limits remembered, SQLite state', () => {
  it('a second run of another pipeline with the same key starts at the learned rate (at most one 429); another key does not inherit it; no key is written', async () => {
    await using t = await bench({ path: 'state.sqlite' });
    const first = await t.run('first', 'learner');
    expect(first.rateLimited).toBeGreaterThan(0);
    const remembered = sqliteRows(t.dir.path('state.sqlite'), 'SELECT fingerprint, api, rate, above, learned_at FROM key_limits');
    expect(remembered).toHaveLength(1);
    expect(remembered[0]?.rate).toBeGreaterThan(6);
    // What held, as the rate controller knew it: the limit, within what the server's burst of 2 hides.
    expect(remembered[0]?.rate).toBeLessThan(10.5);
    expect(String(remembered[0]?.fingerprint)).toMatch(/^[A-Za-z0-9_-]{22}$/);

    const second = await t.run('second', 'learner');
    expect(second.rateLimited).toBeLessThanOrEqual(1);
    // A key never seen in this database pays its discovery, as the first did.
    const stranger = await t.run('stranger', 'other');
    expect(stranger.rateLimited).toBeGreaterThan(0);
    expect(sqliteRows(t.dir.path('state.sqlite'), 'SELECT count(*) AS n FROM key_limits')).toEqual([{ n: 2 }]);
    // One secret, made once, which no run prints.
    const secret = sqliteRows(t.dir.path('state.sqlite'), `SELECT value FROM webdata_meta WHERE key = 'key_secret'`);
    expect(secret).toHaveLength(1);
    const printed = [first, second, stranger].map((run) => run.result.stdout + run.result.stderr).join('\n');
    expect(printed).not.toContain(String(secret[0]?.value));
    noKeyIn(t.dir.dir, printed, Object.values(KEYS));
  });

  it('a pool: each key remembered by its fingerprint, whatever its label; the next run with the same keys under other labels pays no discovery', async () => {
    await using t = await bench({ path: 'state.sqlite' });
    const first = await t.run('pool-first', { pool: `a=${KEYS.learner},b=${KEYS.other}` });
    expect(first.rateLimitedOf('learner')).toBeGreaterThan(0);
    expect(first.rateLimitedOf('other')).toBeGreaterThan(0);
    expect(sqliteRows(t.dir.path('state.sqlite'), 'SELECT count(*) AS n FROM key_limits')).toEqual([{ n: 2 }]);
    const second = await t.run('pool-second', { pool: `main=${KEYS.other}\nspare=${KEYS.learner}` });
    expect(second.rateLimitedOf('learner')).toBeLessThanOrEqual(1);
    expect(second.rateLimitedOf('other')).toBeLessThanOrEqual(1);
    noKeyIn(t.dir.dir, [first, second].map((run) => run.result.stdout + run.result.stderr).join('\n'), Object.values(KEYS));
  });

  it('a run interrupted (Ctrl-C) keeps what its key learned before it stopped', async () => {
    await using t = await bench({ path: 'state.sqlite' });
    // The last query's pages are held: the run cannot end before its signal. Reached only after the first four
    // queries' 40 pages, long after the discovery's 429s were answered.
    const held = t.sim.park({ q: 'filter' });
    const running = startCli(['run', t.pipeline('interrupted')], { cwd: t.dir.dir, env: { WEBDATA_BASE_URL: t.sim.url, WEBDATA_API_KEY: KEYS.learner } });
    await running.whileRunning(held.reached());
    expect(t.sim.log().some((entry) => entry.status === 429)).toBe(true);
    running.child.kill('SIGINT');
    await running.printed('SIGINT: stopping');
    held.release();
    const interrupted = await running.done;
    expect(interrupted.code).toBe(130);
    const remembered = sqliteRows(t.dir.path('state.sqlite'), 'SELECT rate FROM key_limits');
    expect(remembered).toHaveLength(1);
    expect(remembered[0]?.rate).toBeGreaterThan(6);
    noKeyIn(t.dir.dir, interrupted.stdout + interrupted.stderr, Object.values(KEYS));
  });
});

describePostgres('limits remembered, PostgreSQL state', () => {
  it('the same in one schema shared by pipelines: the second starts where the first left, the other key does not; no key in any row or file', async () => {
    const db = await testDatabase();
    try {
      await using t = await bench({ url: db.url });
      const first = await t.run('pg-first', 'learner');
      expect(first.rateLimited).toBeGreaterThan(0);
      const second = await t.run('pg-second', 'learner');
      expect(second.rateLimited).toBeLessThanOrEqual(1);
      const stranger = await t.run('pg-stranger', 'other');
      expect(stranger.rateLimited).toBeGreaterThan(0);
      const remembered = await sql(db.url, 'SELECT rate FROM webdata.key_limits');
      expect(remembered).toHaveLength(2);
      // Every row of every table of the state schema, as text: no key in any.
      const tables = await sql(db.url, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'webdata'`);
      for (const { table_name } of tables) {
        const rows = await sql(db.url, `SELECT t::text AS row FROM webdata."${String(table_name)}" t`);
        for (const key of Object.values(KEYS)) expect(rows.filter((row) => String(row.row).includes(key))).toEqual([]);
      }
      noKeyIn(t.dir.dir, [first, second, stranger].map((run) => run.result.stdout + run.result.stderr).join('\n'), Object.values(KEYS));
    } finally {
      await db.drop();
    }
  });
});
