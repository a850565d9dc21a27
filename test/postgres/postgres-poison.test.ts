import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { dedupe, normalize, searchPages, toCsv, toPostgres } from '../../src/index.ts';
import { exitCodeFor } from '../../src/run/exit-codes.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { simulator } from '../helpers.ts';
import { csvRows, runOn, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

/** 900 CJK characters: 2,700 bytes of UTF-8, past a PostgreSQL index entry (2,704 bytes with the rest of its row). */
const CJK_QUERY = Array.from({ length: 900 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20_000))).join('');
const NUL_QUERY = 'nul\u0000query';
/** A URL of 6 KB that does not compress (PostgreSQL compresses a long index entry before it refuses it). */
const LONG_URL = `https://long.example/${randomBytes(4500).toString('base64url')}`;

/**
 * Values a contract-following server (or a user's query list) may send that SQLite stores and PostgreSQL refuses as
 * they are: a lone surrogate in a value and in a key (raw is jsonb), nesting 20,000 deep (stack depth), a 6 KB URL
 * (an index entry's limit, on the dedupe key and the stored keys), NUL in an error body (series.error), a query with
 * NUL and a query of 900 CJK characters (the series' key, the job's data, the results' indexes).
 */
function poison(sim: Simulator): void {
  const body = (item: string) => `{"data":[${item}]}`;
  sim.inject({ fault: 'status', status: 200, match: { q: 'surrogate' }, body: body(String.raw`{"title":"lone \ud800 here","url":"https://surrogate.example/","odd":{"key \udc00":"\ud83d"}}`) });
  sim.inject({ fault: 'status', status: 200, match: { q: 'deep' }, body: body(`{"title":"deep","url":"https://deep.example/","nest":${'['.repeat(20_000)}${']'.repeat(20_000)}}`) });
  sim.inject({ fault: 'status', status: 200, match: { q: 'long' }, body: body(`{"title":"long","url":"${LONG_URL}"}`) });
  sim.inject({ fault: 'status', status: 400, match: { q: 'nul body' }, body: 'bad\u0000request: the server says so' });
}

const QUERIES = ['espresso', 'kettle', 'surrogate', 'deep', 'long', 'nul body', NUL_QUERY, CJK_QUERY];

describePostgres('values PostgreSQL refuses as they are (issue 28, 2)', () => {
  for (const mode of ['append', 'upsert'] as const) {
    it(`are stored (replaced where they cannot be), in a distributed run, ${mode}: exit 0 or 5, the other series whole`, async () => {
      await using sim = await simulator({ seed: 11 });
      poison(sim);
      const db = await testDatabase();
      try {
        let summary: Awaited<ReturnType<typeof runOn>> | undefined;
        let error: unknown;
        try {
          summary = await runOn(
            sim,
            {
              name: 'poison',
              source: searchPages({ queries: QUERIES, countries: ['us'], maxPages: 2 }),
              stages: [normalize(), dedupe({ scope: 'global' })],
              sinks: [toPostgres({ url: db.url, table: 'results', mode })],
            },
            { stateUrl: db.url },
          );
        } catch (caught) {
          error = caught;
        }
        // Before: exit 1 on every resume (22P02, 54001, 54000, 22021), the series stuck active.
        expect(error).toBeUndefined();
        expect([0, 5]).toContain(exitCodeFor({ summary, error }));
        // The one a 400 failed (its NUL-bearing body kept, replaced), and none else.
        expect(summary?.series).toMatchObject({ total: QUERIES.length, failed: 1 });
        const failed = await sql(db.url, `SELECT query, error FROM webdata.series WHERE reason = 'failed'`);
        expect(failed).toEqual([{ query: 'nul body', error: expect.stringContaining('bad\ufffdrequest') }]);
        // Every other series completed, and its rows are there.
        const byQuery = await sql(db.url, `SELECT query, count(*)::int AS n FROM public.results GROUP BY query`);
        const counts = Object.fromEntries(byQuery.map((row) => [row.query, row.n]));
        expect(counts.espresso).toBeGreaterThan(10);
        expect(counts.kettle).toBeGreaterThan(10);
        expect(counts[CJK_QUERY]).toBeGreaterThan(10);
        expect(counts['nul\ufffdquery']).toBeGreaterThan(10);
        const odd = await sql(db.url, `SELECT query, title, url, dedupe_key, raw FROM public.results WHERE query IN ('surrogate', 'deep', 'long') ORDER BY query`);
        expect(odd.map((row) => row.query)).toEqual(['deep', 'long', 'surrogate']);
        const [deep, long, surrogate] = odd as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
        // Lone surrogates become U+FFFD, in values and keys of raw as in the columns.
        expect(surrogate.title).toBe('lone \ufffd here');
        expect(surrogate.raw).toEqual({ title: 'lone \ufffd here', url: 'https://surrogate.example/', odd: { 'key \ufffd': '\ufffd' } });
        // Nesting too deep for jsonb is kept whole, as its JSON text.
        expect(typeof deep.raw).toBe('string');
        expect(JSON.parse(deep.raw as string).nest).toBeInstanceOf(Array);
        // The URL as served; its dedupe key bounded (a prefix and a digest of the whole).
        expect(long.url).toBe(LONG_URL);
        expect(Buffer.byteLength(long.dedupe_key as string)).toBeLessThanOrEqual(512);
        expect(long.dedupe_key).toMatch(/^https:\/\/long\.example\/.+#sha256=[\w-]{43}$/);
      } finally {
        await db.drop();
      }
    });
  }

  it('the same dedupe keys in SQLite and PostgreSQL, however long', async () => {
    await using sim = await simulator({ seed: 11 });
    poison(sim);
    using dir = workdir();
    const db = await testDatabase();
    try {
      const pipeline = {
        name: 'keys',
        source: searchPages({ queries: ['long', 'espresso'], countries: ['us'], maxPages: 1 }),
        stages: [normalize()],
      };
      await runOn(sim, { ...pipeline, sinks: [toCsv({ path: dir.path('k.csv') })] });
      await runOn(sim, { ...pipeline, sinks: [toPostgres({ url: db.url, table: 'results' })] }, { stateUrl: db.url });
      const fromCsv = csvRows(dir.path('k.csv')).map((row) => row.dedupe_key).sort();
      const fromPostgres = (await sql(db.url, 'SELECT dedupe_key FROM public.results')).map((row) => row.dedupe_key).sort();
      expect(fromPostgres).toEqual(fromCsv);
    } finally {
      await db.drop();
    }
  });

  it('a page a table of the user\'s still refuses fails its series alone (exit 5), and a resume retries that page', async () => {
    await using sim = await simulator({ seed: 12 });
    sim.inject({ fault: 'status', status: 200, match: { q: 'refused', page: 2 }, body: `{"data":[{"title":"REFUSED by the table","url":"https://refused.example/"}]}` });
    const db = await testDatabase();
    try {
      // The user's table, made before the run: a CHECK that no replacement can satisfy.
      await sql(
        db.url,
        `CREATE TABLE public.results (run_id text, query text, country text, lang text, page integer, position integer, rank integer,
           title text CHECK (title IS NULL OR title NOT LIKE 'REFUSED%'), url text, domain text, snippet text, dedupe_key text, fetched_at timestamptz, raw jsonb)`,
      );
      const pipeline = {
        name: 'refused',
        source: searchPages({ queries: ['espresso', 'refused', 'kettle'], countries: ['us'], maxPages: 3 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'results' })],
      };
      const summary = await runOn(sim, pipeline, { stateUrl: db.url });
      // Before: exit 1 (23514) on every resume, the series stuck active.
      expect(exitCodeFor({ summary })).toBe(5);
      expect(summary.series).toMatchObject({ completed: 2, failed: 1, failedBy: { unstorable: 1 } });
      const [failed] = await sql(db.url, `SELECT query, error, next_page FROM webdata.series WHERE reason = 'failed'`);
      expect(failed).toMatchObject({ query: 'refused', next_page: 2, error: expect.stringContaining('page 2 of series') });
      const rows = async (query: string) => (await sql(db.url, `SELECT page FROM public.results WHERE query = $1 ORDER BY page`, [query])).map((row) => row.page);
      expect(await rows('refused')).toEqual(Array(10).fill(1));
      expect((await rows('kettle')).length).toBe(30);
      // The table takes it now: the failed series is retried from the page it could not store.
      await sql(db.url, `ALTER TABLE public.results DROP CONSTRAINT results_title_check`);
      const resumed = await runOn(sim, pipeline, { stateUrl: db.url, resume: true });
      expect(resumed.status).toBe('completed');
      // (The refused page is short, one item: it ends the series as served.)
      expect(await rows('refused')).toEqual([...Array(10).fill(1), 2]);
      expect(await sql(db.url, `SELECT title FROM public.results WHERE page = 2 AND query = 'refused'`)).toEqual([{ title: 'REFUSED by the table' }]);
    } finally {
      await db.drop();
    }
  });
});
