import pg from 'pg';
import { expect, it } from 'vitest';
import type { Page } from '../../src/pipeline/page.ts';
import type { NormalizedItem } from '../../src/stages/normalized-item.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { toPostgres } from '../../src/sinks/postgres.ts';
import type { PageCommit, StateStore } from '../../src/state/interfaces.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { cutProxy, until } from '../postgres/cut-proxy.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

// Two workers of one distributed run whose dedupe is global: each one's stages looked the key up before the other
// committed it, so both take it as new. The page statements decide: one claims it, the other's row is dropped.

const RUN = 'run-1';
const SCOPE = 'run|*';

function item(key: string | null, query: string, position: number) {
  return {
    run_id: RUN,
    query,
    country: 'us',
    lang: '',
    page: 1,
    position,
    rank: position,
    title: `title ${position}`,
    url: key,
    domain: 'example.com',
    snippet: null,
    dedupe_key: key,
    fetched_at: '2026-11-23T00:00:00.000Z',
    raw: '{}',
  };
}

function pageOf(query: string, items: ReturnType<typeof item>[]): { page: Page<NormalizedItem>; commit: PageCommit } {
  const series = { id: `search|${query}|us|`, endpoint: 'search', query, country: 'us', lang: '' };
  const keys = items.flatMap((i) => (i.dedupe_key === null ? [] : [i.dedupe_key]));
  return {
    page: { key: `${series.id}#1`, series, number: 1, items, meta: { served: items.length, fetchedAt: items[0]?.fetched_at ?? '' } } as unknown as Page<NormalizedItem>,
    commit: {
      runId: RUN,
      seq: 0,
      series: { seriesId: series.id, endpoint: 'search', query, country: 'us', lang: '' },
      progress: { status: 'active', reason: null, nextPage: 2, served: items.length, written: items.length, duplicates: 0, digest: 'd', noNew: 0, cursor: null, state: { kind: 'snapshot', json: null } },
      spend: [],
      journal: null,
      checkpoints: [],
      rows: [],
      dedupe: {
        keys: keys.map((key) => ({ scope: SCOPE, key, runId: RUN })),
        sightings: items.map((i) => ({ key: i.dedupe_key ?? '', query, country: 'us', lang: '', page: 1, position: i.position, rank: i.rank, fetchedAt: i.fetched_at, first: true })).filter((s) => s.key !== ''),
      },
      claimKeys: true,
    },
  };
}

type Worker = { store: StateStore; sink: ReturnType<typeof toPostgres> };

/** A fenced store and a PostgreSQL sink for each pool, as the workers of one run have them. */
async function workersOn(url: string, pools: pg.Pool[]): Promise<Worker[]> {
  const workers: Worker[] = [];
  for (const [index, pool] of pools.entries()) {
    const shared = await postgresStateStore(pool, postgresTarget(url), { schema: 'webdata', pipeline: 'p' });
    const store = shared.fenced({ workerId: `w${index}`, finish: async () => true, committed: () => undefined });
    const sink = toPostgres({ url, table: 'results' });
    await sink.open({
      runId: RUN,
      pipeline: 'p',
      database: () => {
        throw new Error('no SQLite here');
      },
      postgres: () => pool,
      stateCheckpoints: store.checkpoints,
      currentSeq: 0,
      statePath: '',
      tagColumns: [],
      shared: true,
    });
    workers.push({ store, sink });
  }
  return workers;
}

/** A page's commit with its sink's rows, as the committer hands it to the store. */
function withRows(sink: Worker['sink'], of: ReturnType<typeof pageOf>): PageCommit {
  if (sink.commits.kind !== 'rows') throw new Error('the PostgreSQL sink takes part with rows');
  return { ...of.commit, rows: [sink.commits.rows(of.page, 0)] };
}

describePostgres('dedupe across series in a distributed run: keys are claimed in the page statement', () => {
  it("a key two workers both took as new is written once: the second page's row for it is dropped, its sighting is not first, its series' counts say so", async () => {
    const db = await testDatabase();
    const pools = [new pg.Pool({ connectionString: db.url, max: 2 }), new pg.Pool({ connectionString: db.url, max: 2 })];
    try {
      const workers = await workersOn(db.url, pools);
      const [first, second] = workers as [Worker, Worker];
      await first.store.startRun({ runId: RUN, pipeline: 'p', startedAt: '2026-11-23T00:00:00.000Z', fingerprint: 'f', plan: {}, budget: null });
      expect(first.sink.claimsDedupeKeys).toBe(true);

      const a = pageOf('alpha', [item('https://shared.example/', 'alpha', 1), item('https://alpha.example/', 'alpha', 2), item(null, 'alpha', 3)]);
      const b = pageOf('beta', [item('https://beta.example/', 'beta', 1), item('https://shared.example/', 'beta', 2), item(null, 'beta', 3)]);
      await first.store.commitPage(withRows(first.sink, a));
      await second.store.commitPage(withRows(second.sink, b));

      const rows = await sql(db.url, `SELECT query, position, dedupe_key FROM results ORDER BY query, position`);
      expect(rows).toEqual([
        { query: 'alpha', position: 1, dedupe_key: 'https://shared.example/' },
        { query: 'alpha', position: 2, dedupe_key: 'https://alpha.example/' },
        { query: 'alpha', position: 3, dedupe_key: null },
        { query: 'beta', position: 1, dedupe_key: 'https://beta.example/' },
        { query: 'beta', position: 3, dedupe_key: null },
      ]);
      const sightings = await sql(db.url, `SELECT query, dedupe_key, first FROM webdata.sightings ORDER BY query, position`);
      expect(sightings).toEqual([
        { query: 'alpha', dedupe_key: 'https://shared.example/', first: true },
        { query: 'alpha', dedupe_key: 'https://alpha.example/', first: true },
        { query: 'beta', dedupe_key: 'https://beta.example/', first: true },
        { query: 'beta', dedupe_key: 'https://shared.example/', first: false },
      ]);
      const counts = await sql(db.url, `SELECT query, items_written, duplicates FROM webdata.series ORDER BY query`);
      expect(counts).toEqual([
        { query: 'alpha', items_written: 3, duplicates: 0 },
        { query: 'beta', items_written: 2, duplicates: 1 },
      ]);
    } finally {
      for (const pool of pools) await pool.end();
      await db.drop();
    }
  });

  it("a worker's refused claims come off its series' counts once, when the answer to that statement was lost and it was sent again", async () => {
    const db = await testDatabase();
    await using through = await cutProxy(db.url);
    const pools = [new pg.Pool({ connectionString: db.url, max: 2 }), new pg.Pool({ connectionString: through.url, max: 2 })];
    try {
      const [first, second] = (await workersOn(db.url, pools)) as [Worker, Worker];
      await first.store.startRun({ runId: RUN, pipeline: 'p', startedAt: '2026-11-23T00:00:00.000Z', fingerprint: 'f', plan: {}, budget: null });
      await first.store.commitPage(withRows(first.sink, pageOf('alpha', [item('https://shared.example/', 'alpha', 1)])));
      const b = pageOf('beta', [item('https://beta.example/', 'beta', 1), item('https://shared.example/', 'beta', 2)]);
      // The statement that takes the refused row off beta's counts runs on the server; its answer never comes back.
      const muted = through.muteOn('items_written - $3');
      const committing = second.store.commitPage(withRows(second.sink, b));
      const cut = await muted;
      const beta = `SELECT items_written, duplicates FROM webdata.series WHERE query = 'beta'`;
      await until(async () => (await sql(db.url, beta))[0]?.duplicates === 1, "beta's counts put right on the server");
      cut();
      await committing;
      // Before: sent again on a new connection, it took the row off a second time (items_written 0, duplicates 2).
      expect(await sql(db.url, beta)).toEqual([{ items_written: 1, duplicates: 1 }]);
      expect(await sql(db.url, `SELECT query, position FROM results ORDER BY query, position`)).toEqual([
        { query: 'alpha', position: 1 },
        { query: 'beta', position: 1 },
      ]);
    } finally {
      for (const pool of pools) await pool.end();
      await db.drop();
    }
  });
});
