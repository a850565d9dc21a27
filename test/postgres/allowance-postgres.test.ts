// Keys' allowances with the state in PostgreSQL (docs/credits.md#allowances), from the command line over real sockets
// against the simulator: two pipelines sharing a key and a state database, the second stopped by what the first spent
// and a different declaration refused; four processes racing for the last credits of a day, never paid past the
// allowance at the server.
import { expect, it } from 'vitest';
import { cli, config, envFor } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

const SEARCH = { queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 3 };
const ALLOWANCE = { credits: 7, per: 'day', timezone: 'America/New_York' };

describePostgres('keys’ allowances with the state in PostgreSQL', () => {
  it('two pipelines sharing a key and a database: the second stopped by what the first spent; another allowance refused', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      // The first a distributed run (its rows in the database too), the second with its rows in a file.
      const first = await cli(['run', config(dir.dir, { name: 'first', allowance: ALLOWANCE, state: { url: db.url }, sinks: [{ type: 'postgres', table: 'results', url: db.url }] }, SEARCH)], {
        cwd: dir.dir,
        env: envFor(sim.url),
      });
      expect(first.code, first.stderr).toBe(0);
      expect(JSON.parse(first.stdout)).toMatchObject({ status: 'allowance', pages: { fetched: 7 } });
      const second = await cli(['run', config(dir.dir, { name: 'second', state: { url: db.url }, sinks: [{ type: 'csv', path: 'second.csv' }] }, SEARCH)], { cwd: dir.dir, env: envFor(sim.url) });
      expect(second.code, second.stderr).toBe(0);
      expect(JSON.parse(second.stdout)).toMatchObject({ status: 'allowance', pages: { fetched: 0 } });
      const other = await cli(['run', config(dir.dir, { name: 'other', allowance: { ...ALLOWANCE, credits: 9 }, state: { url: db.url }, sinks: [{ type: 'csv', path: 'other.csv' }] }, SEARCH)], {
        cwd: dir.dir,
        env: envFor(sim.url),
      });
      expect(other.code).toBe(2);
      expect(other.stderr).toContain(
        'allowance: pipeline "other" declares 9 credits a day (America/New_York) for the key labelled "default", but pipeline "first" recorded 7 credits a day (America/New_York) for the same key',
      );
      expect(sim.stats().credits.main?.debited).toBe(7);
      expect(await sql(db.url, `SELECT pipeline, key_label AS label, count(*)::int AS n FROM webdata.spend GROUP BY 1, 2`)).toEqual([{ pipeline: 'first', label: 'default', n: 7 }]);
      expect(await sql(db.url, `SELECT pipeline, credits::int AS credits, per, timezone FROM webdata.key_allowances`)).toEqual([{ pipeline: 'first', ...ALLOWANCE }]);
      expect(await sql(db.url, `SELECT count(*)::int AS n FROM webdata.key_holds`)).toEqual([{ n: 0 }]);
    } finally {
      await db.drop();
    }
  });

  it('four processes racing for the last credits of a day (30, each wanting 36): the server is paid 30 at most', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const search = { queries: ['espresso', 'kettle', 'grinder', 'tamper', 'scale', 'filter'], countries: ['us', 'gb'], maxPages: 3 };
      const runs = await Promise.all(
        [0, 1, 2, 3].map((i) =>
          cli(['run', config(dir.dir, { name: `racer-${i}`, allowance: { credits: 30, per: 'day' }, rate: { concurrency: 3 }, state: { url: db.url }, sinks: [{ type: 'csv', path: `racer-${i}.csv` }] }, search)], {
            cwd: dir.dir,
            env: envFor(sim.url),
          }),
        ),
      );
      for (const each of runs) expect(each.code, each.stderr).toBe(0);
      const debited = sim.stats().credits.main?.debited ?? 0;
      expect(debited).toBeLessThanOrEqual(30);
      // Every paid answer is in the ledger once, under the key's period; nothing is held once they are done.
      expect(await sql(db.url, `SELECT sum(credits)::int AS credits, count(DISTINCT period)::int AS periods FROM webdata.spend`)).toEqual([{ credits: debited, periods: 1 }]);
      expect(runs.reduce((sum, each) => sum + (JSON.parse(each.stdout) as { pages: { fetched: number } }).pages.fetched, 0)).toBe(debited);
      expect(await sql(db.url, `SELECT count(*)::int AS n FROM webdata.key_holds WHERE credits > 0`)).toEqual([{ n: 0 }]);
      // Stopped by the allowance, all of them (none ran out of pages first).
      expect(runs.map((each) => (JSON.parse(each.stdout) as { status: string }).status)).toEqual(['allowance', 'allowance', 'allowance', 'allowance']);
    } finally {
      await db.drop();
    }
  });
});
