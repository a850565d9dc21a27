import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { normalize, searchPages, toPostgres } from '../../src/index.ts';
import { preparedQuery } from '../../src/commits/prepared-statement.ts';
import { simulator } from '../helpers.ts';
import { runOn } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

// Page statements run as named (prepared) statements: parsed and planned once per connection (src/commits/prepared-statement.ts).

describePostgres('prepared page statements', () => {
  it('commit every page once when the tables change under them mid-run (plans replanned), in the state’s statement and in a sink’s own', async () => {
    await using sim = await simulator({ seed: 5 });
    const state = await testDatabase();
    const other = await testDatabase();
    try {
      // Between pages, another session alters both tables: a prepared statement's plan must follow the table, not
      // fail or write into the old shape. The second database's sink commits with a statement of its own.
      let altered = false;
      const alterMidRun = async function* (pages: AsyncIterable<{ number: number; items: unknown[] }>) {
        for await (const page of pages) {
          if (page.number === 2 && !altered) {
            altered = true;
            for (const url of [state.url, other.url]) await sql(url, 'ALTER TABLE public.results ADD COLUMN note text DEFAULT NULL');
          }
          yield page;
        }
      };
      // Which page statements went out named (the driver the run loads is this one: node-postgres's CommonJS module).
      const named = new Set<string>();
      let unnamed = 0;
      const query = pg.Client.prototype.query;
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        const config = args[0] as { name?: string; text?: string };
        if (typeof config === 'object' && config.text?.startsWith('WITH')) {
          if (config.name) named.add(config.name);
          else unnamed += 1;
        }
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      } as typeof query;
      const summary = await runOn(sim, {
        name: 'pg-prepared',
        source: searchPages({ queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 3 }),
        stages: [normalize(), alterMidRun] as never,
        sinks: [toPostgres({ url: state.url, table: 'results' }), toPostgres({ url: other.url, table: 'results' })] as never,
        state: { url: state.url, journal: 'prune' },
      });
      pg.Client.prototype.query = query;
      expect(summary.status).toBe('completed');
      expect(altered).toBe(true);
      // A handful of texts (a page with spend or without, a series' last page, …), each named, none sent unnamed.
      expect(named.size).toBeGreaterThan(0);
      expect(unnamed).toBe(0);
      for (const url of [state.url, other.url]) {
        const counts = await sql(url, 'SELECT COUNT(*)::int AS n, COUNT(DISTINCT (query, country, page, position))::int AS distinct_rows, COUNT(DISTINCT (query, country, page))::int AS pages FROM public.results');
        expect(counts).toEqual([{ n: summary.items.written, distinct_rows: summary.items.written, pages: summary.pages.fetched }]);
        expect(await sql(url, 'SELECT seq::int AS seq FROM public.webdata_checkpoints')).toEqual([{ seq: summary.pages.fetched }]);
      }
    } finally {
      await state.drop();
      await other.drop();
    }
  });
});

// After the run above: filling the names up to the cap would leave its statements unnamed.
describe('a page statement’s name', () => {
  it('is the same for the same text, another for another text, and none past the cap', () => {
    const a = preparedQuery('SELECT 1 AS prepared_a', [1]);
    expect(a.name).toMatch(/^webdata_[0-9a-f]{32}$/);
    expect(preparedQuery('SELECT 1 AS prepared_a', [2])).toEqual({ name: a.name, text: 'SELECT 1 AS prepared_a', values: [2] });
    expect(preparedQuery('SELECT 1 AS prepared_b', []).name).not.toBe(a.name);
    // A process that meets many texts stops naming new ones (each would be kept on every connection): they run unnamed.
    for (let i = 0; i < 100; i++) preparedQuery(`SELECT ${i} AS filler`, []);
    expect(preparedQuery('SELECT 1 AS prepared_c', [])).toEqual({ text: 'SELECT 1 AS prepared_c', values: [] });
    // Those named before keep their names.
    expect(preparedQuery('SELECT 1 AS prepared_a', []).name).toBe(a.name);
  });
});
