// Retention and `prune` (docs/design.md#retention, docs/cli.md#prune) over the two state stores, after real runs of a
// pipeline against the simulator: a dry run removes nothing; a prune removes the records of the runs past
// `retention.runs` and the spend past `retention.spend`, and nothing else — never the latest run, one that may resume,
// one holding credits, nor a results table's or outcomes table's rows — and the views and `runs` read the same after;
// a run commits between its batches.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { dedupe, normalize, type PipelineDefinition, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresPruneDatabase } from '../../src/state/postgres/prune.ts';
import { prune, type PruneDatabase } from '../../src/state/prune.ts';
import { sqlitePruneDatabase } from '../../src/state/sqlite/prune.ts';
import { cli } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

type Row = Record<string, unknown>;

/** A state store under test: the pipeline writing to it, its tables read beside it, and `prune`'s view of it. */
interface StoreUnderTest {
  pipeline(): PipelineDefinition;
  /** The rows of `text`, in which `{state}.` and `{results}.` are the state's and the results' schemas. */
  all(text: string): Promise<Row[]>;
  /** Writes as a run another process left behind would: `text`, with `{state}.` as in `all`. */
  write(text: string): Promise<void>;
  /** When a hold's holder stops renewing it, in the store's type: here, long past (a hold its holder left). */
  past: string;
  open(): Promise<PruneDatabase>;
  /** What `webdata-etl runs` takes for it. */
  argument: string;
  /** The results table's `changes` view. */
  changes: string;
  /** The state tables with a `run_id` column, from the database's catalog. */
  runTables(): Promise<string[]>;
  /** The pipeline with its journal kept and a dedupe across series (its sightings kept). */
  keeping(): PipelineDefinition;
  [Symbol.asyncDispose](): Promise<void>;
}

const SEARCH = { queries: ['espresso'], countries: ['us', 'gb'], maxPages: 2 };

function sqliteUnderTest(): StoreUnderTest {
  const dir = workdir();
  const path = dir.path('rank.sqlite');
  return {
    pipeline: () => ({ name: 'kept', source: searchPages(SEARCH), stages: [normalize()], sinks: [toSqlite({ path, table: 'results' })] }),
    all: async (text) => sqliteRows(path, text.replaceAll('{state}.', '').replaceAll('{results}.', '')),
    write: async (text) => {
      const db = new Database(path);
      try {
        db.exec(text.replaceAll('{state}.', ''));
      } finally {
        db.close();
      }
    },
    past: '0',
    open: async () => sqlitePruneDatabase(path),
    argument: path,
    changes: 'report_changes',
    runTables: async () =>
      (await sqliteRows(path, `SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) c WHERE m.type = 'table' AND c.name = 'run_id' AND m.name NOT IN ('results', 'results_outcomes') ORDER BY 1`)).map(
        (row) => row.name as string,
      ),
    keeping: () => ({
      name: 'kept',
      source: searchPages(SEARCH),
      stages: [normalize(), dedupe({ scope: 'query' })],
      sinks: [toSqlite({ path, table: 'results' })],
      state: { journal: 'keep' },
    }),
    [Symbol.asyncDispose]: async () => dir[Symbol.dispose](),
  };
}

async function postgresUnderTest(): Promise<StoreUnderTest> {
  const db = await testDatabase();
  return {
    pipeline: () => ({ name: 'kept', source: searchPages(SEARCH), stages: [normalize()], sinks: [toPostgres({ url: db.url, table: 'results' })], state: { url: db.url } }),
    all: (text) => sql(db.url, text.replaceAll('{state}.', 'webdata.').replaceAll('{results}.', 'public.').replaceAll('count(*)', 'count(*)::int')),
    write: async (text) => void (await sql(db.url, text.replaceAll('{state}.', 'webdata.'))),
    past: "'-infinity'",
    open: () => postgresPruneDatabase(postgresTarget(db.url), 'webdata'),
    argument: db.url,
    changes: 'report_changes',
    runTables: async () =>
      (
        await sql(
          db.url,
          `SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = 'webdata' AND c.column_name = 'run_id' AND t.table_type = 'BASE TABLE' ORDER BY 1`,
        )
      ).map((row) => row.table_name as string),
    keeping: () => ({
      name: 'kept',
      source: searchPages(SEARCH),
      stages: [normalize(), dedupe({ scope: 'query' })],
      sinks: [toPostgres({ url: db.url, table: 'results' })],
      state: { url: db.url, journal: 'keep' },
    }),
    [Symbol.asyncDispose]: () => db.drop(),
  };
}

/** Every table a prune may touch, and the user's, counted. */
async function counts(store: StoreUnderTest): Promise<Record<string, number>> {
  const tables = ['runs', 'series', 'run_sinks', 'spend', 'pages', 'notifications', 'occurrences'].map((t) => `{state}.${t}`);
  const all = [...tables, '{results}.results', '{results}.results_outcomes'];
  const found: Record<string, number> = {};
  for (const table of all) found[table] = Number((await store.all(`SELECT count(*) AS n FROM ${table}`))[0]?.n);
  return found;
}

const runIds = async (store: StoreUnderTest) => (await store.all(`SELECT run_id FROM {state}.runs ORDER BY started_at, run_id`)).map((row) => row.run_id as string);

/** Six runs of the pipeline, the first left as a run that may resume and the second holding credits of a key. */
async function sixRuns(store: StoreUnderTest, sim: Awaited<ReturnType<typeof simulator>>): Promise<string[]> {
  for (let i = 0; i < 6; i++) expect((await runOn(sim, store.pipeline())).status).toBe('completed');
  const ids = await runIds(store);
  expect(ids).toHaveLength(6);
  // As a run killed on another machine leaves it (the next invocation would resume it), and a process at work on its
  // run with credits of an allowance held: written as those leave them.
  await store.write(`UPDATE {state}.runs SET status = 'interrupted' WHERE run_id = '${ids[0]}'`);
  // Even a hold whose holder stopped renewing it: its run may be at work still, the hold only lapsed.
  await store.write(
    `INSERT INTO {state}.key_holds (fingerprint, period, holder, pipeline, run_id, credits, expires_at) VALUES ('f', '2026-11', 'h', 'kept', '${ids[1]}', 1, ${store.past})`,
  );
  return ids;
}

const stores = [
  { name: 'SQLite', describe, open: async () => sqliteUnderTest() },
  { name: 'PostgreSQL', describe: describePostgres, open: postgresUnderTest },
];

for (const { name, describe: describeStore, open } of stores) {
  describeStore(`prune: ${name}`, () => {
    it('a dry run removes nothing; --yes removes the runs past retention.runs and nothing else; the views and runs read the same after', async () => {
      await using sim = await simulator();
      await using store = await open();
      const ids = await sixRuns(store, sim);
      const pruned = ids.slice(2, 4);
      const before = await counts(store);
      const changes = await store.all(`SELECT * FROM {results}.${store.changes} ORDER BY query, country, dedupe_key, change`);
      const credits = await store.all(`SELECT SUM(credits) AS credits FROM {state}.webdata_spend`);
      expect(changes.length).toBeGreaterThan(0);
      expect(Number(credits[0]?.credits)).toBeGreaterThan(0);
      const seriesOfPruned = Number((await store.all(`SELECT count(*) AS n FROM {state}.series WHERE run_id IN ('${pruned.join("', '")}')`))[0]?.n);
      expect(seriesOfPruned).toBe(4);
      const spendOfPruned = Number((await store.all(`SELECT count(*) AS n FROM {state}.spend WHERE run_id IN ('${pruned.join("', '")}')`))[0]?.n);
      expect(spendOfPruned).toBeGreaterThan(0);

      const db = await store.open();
      try {
        const policy = [{ pipeline: 'kept', runs: 2, spendDays: null }];
        const dry = await prune(db, policy, { apply: false });
        expect(dry.pipelines).toEqual([{ pipeline: 'kept', runs: pruned, kept: 4 }]);
        expect(dry.rows).toMatchObject({ series: seriesOfPruned, runs: 2, run_sinks: 2 });
        expect(dry.rows.spend).toBeUndefined();
        expect(dry.bytes).toBeGreaterThan(0);
        expect(await counts(store)).toEqual(before);

        const done = await prune(db, policy, { apply: true, batch: 3 });
        expect(done.rows).toEqual(dry.rows);
      } finally {
        await db.close();
      }
      // The runs past the last two go, but the one that may resume and the one holding credits stay.
      expect(await runIds(store)).toEqual([ids[0], ids[1], ids[4], ids[5]]);
      expect(await counts(store)).toEqual({
        ...before,
        '{state}.runs': 4,
        '{state}.series': (before['{state}.series'] ?? 0) - seriesOfPruned,
        '{state}.run_sinks': (before['{state}.run_sinks'] ?? 0) - 2,
      });
      // No state table holds a row of a pruned run but the ledger (whatever tables a later version adds: read from the catalog).
      const tables = await store.runTables();
      expect(tables).toEqual(expect.arrayContaining(['runs', 'series', 'series_state', 'pages', 'run_sinks', 'sightings', 'notifications', 'occurrences', 'spend', 'key_holds']));
      for (const table of tables) {
        const left = Number((await store.all(`SELECT count(*) AS n FROM {state}.${table} WHERE run_id IN ('${pruned.join("', '")}')`))[0]?.n);
        expect(`${table}: ${left}`).toBe(`${table}: ${table === 'spend' ? spendOfPruned : 0}`);
      }
      // The user's rows and their outcomes untouched, the views over them alike; the ledger kept (spend: forever).
      expect(await store.all(`SELECT * FROM {results}.${store.changes} ORDER BY query, country, dedupe_key, change`)).toEqual(changes);
      expect(await store.all(`SELECT SUM(credits) AS credits FROM {state}.webdata_spend`)).toEqual(credits);
      const runs = await cli(['runs', store.argument, '--json'], { cwd: process.cwd() });
      expect(runs.code, runs.stderr).toBe(0);
      expect(runs.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { runId?: string }).runId)).toEqual([ids[0], ids[1], ids[4], ids[5]]);

      // Spend kept 400 days, a prune 401 days on: every row of the ledger goes but the resumable run's.
      const later = new Date(Date.now() + 401 * 86_400_000);
      const spend = await store.open();
      try {
        const report = await prune(spend, [{ pipeline: 'kept', runs: undefined, spendDays: 400 }], { apply: true, now: later });
        const left = await store.all(`SELECT run_id, count(*) AS n FROM {state}.spend GROUP BY run_id`);
        expect(left.map((row) => row.run_id)).toEqual([ids[0]]);
        expect(report.rows).toEqual({ spend: (before['{state}.spend'] ?? 0) - Number(left[0]?.n) });
        // 399 days on, nothing of it.
        expect((await prune(spend, [{ pipeline: 'kept', runs: undefined, spendDays: 400 }], { apply: false, now: new Date(Date.now() + 399 * 86_400_000) })).rows).toEqual({});
      } finally {
        await spend.close();
      }
    });

    it("with the journal kept and a dedupe across series: a pruned run's journal entries and sightings go, its settled notifications and occurrences but the latest; the kept runs' stay", async () => {
      await using sim = await simulator();
      await using store = await open();
      for (let i = 0; i < 4; i++) expect((await runOn(sim, store.keeping())).status).toBe('completed');
      const ids = await runIds(store);
      const [first, second] = ids;
      const ofRuns = async (table: string, runs: readonly (string | undefined)[]) =>
        Number((await store.all(`SELECT count(*) AS n FROM {state}.${table} WHERE run_id IN ('${runs.join("', '")}')`))[0]?.n);
      expect(await ofRuns('pages', ids)).toBeGreaterThan(0);
      expect(await ofRuns('sightings', ids)).toBeGreaterThan(0);
      const keptPages = await ofRuns('pages', ids.slice(2));
      const keptSightings = await ofRuns('sightings', ids.slice(2));
      // A webhook told of the first run's end, another still owed it; the first run started by an occurrence, the
      // second by the pipeline's latest: written as a worker and a delivery leave them.
      const at = '2026-11-01T06:00:00.000Z';
      const notification = (hook: string, status: string) =>
        `INSERT INTO {state}.notifications (run_id, invocation, webhook, pipeline, target, event, status, attempts, created_at, updated_at) VALUES ('${first}', 1, '${hook}', 'kept', 'https://example.com/hook', 'run.completed', '${status}', 1, '${at}', '${at}')`;
      await store.write(notification('told', 'delivered'));
      await store.write(notification('owed', 'pending'));
      const occurrence = (run: string | undefined, due: string) =>
        `INSERT INTO {state}.occurrences (pipeline, due_at, outcome, run_id, worker, claimed_at) VALUES ('kept', '${due}', 'ran', '${run}', 'w', '${due}')`;
      await store.write(occurrence(first, '2026-11-01T06:00:00.000Z'));
      await store.write(occurrence(second, '2026-11-02T06:00:00.000Z'));

      const db = await store.open();
      try {
        // No run after the second ended cleanly (both killed, as far as the store knows): a sink may lack its pages
        // yet. The first's go: the second, after it, ended cleanly.
        await store.write(`UPDATE {state}.runs SET status = 'interrupted' WHERE run_id IN ('${ids[2]}', '${ids[3]}')`);
        const unsure = await prune(db, [{ pipeline: 'kept', runs: 2, spendDays: null }], { apply: false });
        expect(unsure.pipelines[0]?.runs).toEqual([first, second]);
        expect(unsure.rows.journal).toBe(await ofRuns('pages', [first]));
        expect(unsure.rows.sightings).toBeGreaterThan(0);
        await store.write(`UPDATE {state}.runs SET status = 'completed' WHERE run_id IN ('${ids[2]}', '${ids[3]}')`);
        const report = await prune(db, [{ pipeline: 'kept', runs: 2, spendDays: null }], { apply: true });
        expect(report.pipelines[0]?.runs).toEqual([first, second]);
        expect(report.rows).toMatchObject({ journal: expect.any(Number), sightings: expect.any(Number), notifications: 1, occurrences: 1 });
      } finally {
        await db.close();
      }
      expect(await ofRuns('pages', [first, second])).toBe(0);
      expect(await ofRuns('sightings', [first, second])).toBe(0);
      expect(await ofRuns('pages', ids.slice(2))).toBe(keptPages);
      expect(await ofRuns('sightings', ids.slice(2))).toBe(keptSightings);
      expect(await store.all(`SELECT webhook, status FROM {state}.notifications`)).toEqual([{ webhook: 'owed', status: 'pending' }]);
      expect((await store.all(`SELECT run_id FROM {state}.occurrences`)).map((row) => row.run_id)).toEqual([second]);
    });

    it('a run commits between its batches: nothing is held from one batch to the next', async () => {
      await using sim = await simulator();
      await using store = await open();
      const ids = await sixRuns(store, sim);
      const db = await store.open();
      let live: Awaited<ReturnType<typeof runOn>> | undefined;
      let batches = 0;
      try {
        // A batch of one row: the run starts, pages and finishes after the first, with the prune not yet done.
        const report = await prune(db, [{ pipeline: 'kept', runs: 2, spendDays: null }], {
          apply: true,
          batch: 1,
          afterBatch: async () => {
            batches++;
            if (batches === 1) live = await runOn(sim, store.pipeline());
          },
        });
        expect(batches).toBeGreaterThan(2);
        expect(report.pipelines[0]?.runs).toEqual(ids.slice(2, 4));
      } finally {
        await db.close();
      }
      expect(live?.status).toBe('completed');
      expect(live?.pages.fetched).toBeGreaterThan(0);
      const all = await runIds(store);
      expect(all).toEqual([ids[0], ids[1], ids[4], ids[5], live?.runId]);
      expect((await store.all(`SELECT count(*) AS n FROM {results}.results WHERE run_id = '${live?.runId}'`))[0]?.n).toBe(live?.items.written);
    });
  });
}
