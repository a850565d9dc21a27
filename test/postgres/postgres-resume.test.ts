import { expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { CRASH_MATRIX, runChild, stableCsv, stableSqlite } from '../run/resume-helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

const SIM = { seed: 21, latencyMs: { min: 2, max: 12 } } as const;
const PLAN = { queries: ['espresso', 'kettle', 'grinder', 'milk frother', 'tamper'], countries: ['us', 'gb'], maxPages: 4, concurrency: 4 };

/** A table's rows as comparable text: the columns that do not vary between runs, raw as a value. */
async function stableTable(url: string, table: string): Promise<string[]> {
  const rows = await sql(url, `SELECT query, country, lang, page, position, rank, title, url, domain, snippet, dedupe_key FROM ${table}`);
  return rows.map((row) => JSON.stringify(Object.values(row))).sort();
}

/** The plan with PostgreSQL as state store and sink (two tables, inside the page transaction), a SQLite file and a CSV beside them. */
const SINKS = ['postgres', 'postgres2', 'sqlite2', 'csv'];

describePostgres('a killed run on PostgreSQL, resumed, ends exactly as an uninterrupted one', () => {
  let expected: Promise<{ table: string[]; sqlite: string[]; csv: string[]; debited: number }> | undefined;
  const reference = () =>
    (expected ??= (async () => {
      await using sim = await simulator(SIM);
      using dir = workdir();
      const db = await testDatabase();
      try {
        const result = await runChild({ ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: SINKS, postgresUrl: db.url, stateUrl: db.url }).done;
        expect(result.code).toBe(0);
        return { table: await stableTable(db.url, 'results'), sqlite: stableSqlite(dir.path('out2.sqlite')), csv: stableCsv(dir.path('out.csv')), debited: sim.stats().credits.main?.debited ?? 0 };
      } finally {
        await db.drop();
      }
    })());

  for (const [point, n] of CRASH_MATRIX) {
    it(`SIGKILL at ${point} (#${n})`, async () => {
      const want = await reference();
      await using sim = await simulator(SIM);
      using dir = workdir();
      const db = await testDatabase();
      try {
        const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: SINKS, postgresUrl: db.url, stateUrl: db.url };
        const killed = await runChild(spec, { WEBDATA_CRASH_AT: `${point}:${n}` }).done;
        expect(killed.signal).toBe('SIGKILL');
        const resumed = await runChild(spec).done;
        expect(resumed.code).toBe(0);
        expect(resumed.summary?.status).toBe('completed');
        if (point === 'between-sinks' || point === 'after-commit') expect(resumed.replayed).toBeGreaterThan(0);
        expect(await stableTable(db.url, 'results')).toEqual(want.table);
        expect(await stableTable(db.url, 'results2')).toEqual(want.table);
        expect(stableSqlite(dir.path('out2.sqlite'))).toEqual(want.sqlite);
        expect(stableCsv(dir.path('out.csv'))).toEqual(want.csv);
        expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(want.debited + PLAN.concurrency);
        // Every sink's checkpoint is the journal's last page, and the journal is empty once all hold it.
        const [{ seq }] = (await sql(db.url, `SELECT seq::int AS seq FROM webdata.pipelines WHERE pipeline = 'crash-test'`)) as [{ seq: number }];
        expect(await sql(db.url, 'SELECT DISTINCT seq::int AS seq FROM public.webdata_checkpoints')).toEqual([{ seq }]);
        expect(await sql(db.url, 'SELECT COUNT(*)::int AS n FROM webdata.pages')).toEqual([{ n: 0 }]);
      } finally {
        await db.drop();
      }
    });
  }
});
