import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { PageCommit, StateStore } from '../../src/state/interfaces.ts';
import { CLAIM_AHEAD_TOLERANCE_MS } from '../../src/state/occurrence-store.ts';
import type { FileAppend, SinkRows } from '../../src/commits/page-writes.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { STATE_SCHEMA_VERSION } from '../../src/state/sqlite/schema.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { rejection } from '../helpers.ts';

/** Notifications taken for delivery before this are stale: none here. */
const STALE = '2000-01-01T00:00:00.000Z';
import { postgresAvailable, testDatabase } from '../postgres/pg.ts';

/**
 * What every state store must do, whatever holds it (docs/design.md#the-state-store): the runner relies on these and
 * nothing else. Each implementation joins the list below and passes the same cases.
 */
interface StoreUnderTest {
  store: StateStore;
  /** Rows of one of the store's tables, read beside the store. */
  count(table: string): Promise<number>;
  /** A results table of a sink on the store's database, made beside the store, and the rows a page hands over for it. */
  results: {
    prepare(): Promise<void>;
    rows(values: string[]): SinkRows;
    /** Rows for a table that does not exist: the page's transaction fails with them. */
    missing(): SinkRows;
    /** How many rows the table holds, and the page its sink's checkpoint says it holds. */
    read(): Promise<{ n: number; seq: number | undefined }>;
  };
  close(): Promise<void>;
}

/** A SQLite store in a file of its own; `commitThread`: its pages committed on its commit thread, as a run's are. */
async function sqliteUnderTest(options: { commitThread?: boolean } = {}): Promise<StoreUnderTest> {
  const dir = mkdtempSync(join(tmpdir(), 'webdata-store-'));
  const db = new Database(join(dir, 'state.db'));
  const store = sqliteStateStore(db, options);
  return {
    store,
    count: async (table) => db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number,
    results: {
      prepare: async () => void db.exec('CREATE TABLE results (v TEXT)'),
      rows: (values) => ({ kind: 'sqlite', sinkId: 'sqlite:x#results', insert: { into: 'INSERT INTO results (v)', width: 1, then: '' }, values }),
      missing: () => ({ kind: 'sqlite', sinkId: 'sqlite:x#none', insert: { into: 'INSERT INTO none (v)', width: 1, then: '' }, values: ['a'] }),
      read: async () => ({
        n: db.prepare('SELECT count(*) FROM results').pluck().get() as number,
        seq: db.prepare("SELECT seq FROM sink_checkpoints WHERE sink_id = 'sqlite:x#results'").pluck().get() as number | undefined,
      }),
    },
    close: async () => {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const implementations: { name: string; available: boolean; oneRunPerStore: boolean; open(): Promise<StoreUnderTest> }[] = [
  // A SQLite file is one pipeline's: its journal's sequence is the file's.
  { name: 'sqlite', available: true, oneRunPerStore: true, open: () => sqliteUnderTest() },
  { name: 'sqlite, its pages on the commit thread', available: true, oneRunPerStore: true, open: () => sqliteUnderTest({ commitThread: true }) },
  {
    name: 'postgres',
    available: postgresAvailable(),
    // A PostgreSQL schema serves many pipelines, each with its own journal.
    oneRunPerStore: false,
    async open() {
      const database = await testDatabase();
      const pool = new pg.Pool({ connectionString: database.url, max: 4 });
      const store = await postgresStateStore(pool, postgresTarget(database.url), { schema: 'webdata', pipeline: 'p' });
      return {
        store,
        count: async (table) => (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM webdata.${table}`)).rows[0]?.n ?? 0,
        results: {
          async prepare() {
            await pool.query('CREATE TABLE public.results (v text)');
            await pool.query('CREATE TABLE public.webdata_checkpoints (pipeline text NOT NULL, sink_id text NOT NULL, seq bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (pipeline, sink_id))');
            await pool.query("INSERT INTO public.webdata_checkpoints (pipeline, sink_id, seq) VALUES ('p', 'postgres:x#results', 0)");
          },
          rows: (values) => pgRows('public.results', values),
          missing: () => pgRows('public.none', ['a']),
          async read() {
            const n = (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM public.results')).rows[0]?.n ?? 0;
            const seq = (await pool.query<{ seq: string }>("SELECT seq FROM public.webdata_checkpoints WHERE sink_id = 'postgres:x#results'")).rows[0]?.seq;
            return { n, seq: seq === undefined ? undefined : Number(seq) };
          },
        },
        close: async () => {
          await pool.end();
          await database.drop();
        },
      };
    },
  },
];

/** A page's rows for the PostgreSQL table `table` (one text column `v`), its checkpoint in `public.webdata_checkpoints`. */
function pgRows(table: string, values: string[]): SinkRows {
  return {
    kind: 'postgres',
    sinkId: 'postgres:x#results',
    table,
    columns: 'v',
    types: ['text'],
    arrays: [values],
    keyColumn: -1,
    conflict: '',
    checkpoint: { table: 'public.webdata_checkpoints', pipeline: 'p' },
  };
}

const series = { seriesId: 's1', endpoint: 'search', query: 'q', country: 'us', lang: 'en' };

function page(seq: number, overrides: Partial<PageCommit> = {}): PageCommit {
  return {
    runId: 'run-1',
    seq,
    series,
    progress: { status: 'active', reason: null, nextPage: seq + 1, served: 10, written: 8, duplicates: 2, digest: `d${seq}`, noNew: 0, cursor: null, state: { kind: 'snapshot', json: null } },
    spend: [{ runId: 'run-1', at: '2026-01-01T00:00:00.000Z', seriesId: 's1', path: '/searchengine/search', attempt: 1, status: '200', credits: 1, uncertain: false, latencyMs: 5 }],
    journal: { seq, runId: 'run-1', pageKey: `k${seq}`, seriesId: 's1', number: seq, meta: '{"page":1}', output: '[{"title":"a"}]', raw: null },
    checkpoints: [{ sinkId: 'csv:out.csv', checkpoint: { seq, bytes: 100 * seq } }],
    rows: [],
    dedupe: { keys: [{ scope: 'run', key: `key${seq}`, runId: 'run-1' }], sightings: [] },
    ...overrides,
  };
}

/** Page `seq` writing its series' stage state as `state` (a snapshot or changes, as JSON text). */
function pageWithState(seq: number, kind: 'snapshot' | 'changes', json: string | null, overrides: Partial<PageCommit['progress']> = {}): PageCommit {
  return page(seq, { progress: { ...page(seq).progress, state: { kind, json }, ...overrides } });
}

async function startRun(store: StateStore): Promise<void> {
  await store.startRun({ runId: 'run-1', pipeline: 'p', startedAt: '2026-01-01T00:00:00.000Z', fingerprint: 'f', plan: { a: 1 }, budget: 10 });
}

async function journal(store: StateStore): Promise<number[]> {
  const seqs: number[] = [];
  for await (const entry of store.journalAfter(0)) seqs.push(entry.seq);
  return seqs;
}

for (const implementation of implementations) {
  describe.skipIf(!implementation.available)(`state store contract: ${implementation.name}`, () => {
    let opened: StoreUnderTest | undefined;
    afterEach(async () => {
      await opened?.close();
      opened = undefined;
    });
    const open = async () => {
      opened = await implementation.open();
      return opened.store;
    };

    it('commits a page as a whole: progress, spend, journal, checkpoint and dedupe keys together', async () => {
      const store = await open();
      await startRun(store);
      const start = await store.currentSeq();
      await store.commitPage(page(start + 1));
      expect(await store.currentSeq()).toBe(start + 1);
      expect(await store.progress('run-1', 's1')).toMatchObject({ status: 'active', nextPage: start + 2, pages: 1, digest: `d${start + 1}` });
      expect((await store.spendOf('run-1')).spent).toBe(1);
      expect(await journal(store)).toEqual([start + 1]);
      expect(await store.checkpoints.get('csv:out.csv')).toEqual({ seq: start + 1, bytes: 100 * (start + 1) });
      const seen = await store.seenKeys('run-1').view(true).seen('run', [`key${start + 1}`, 'other']);
      expect([...seen]).toEqual([`key${start + 1}`]);
    });

    it('says where each of a slice of series stands in a run: ended (and why), under way, or absent (never reached)', async () => {
      const store = await open();
      await startRun(store);
      const start = await store.currentSeq();
      await store.commitPage(page(start + 1));
      const other = { ...series, seriesId: 's2', query: 'q2' };
      await store.endSeries('run-1', other, { status: 'ended', reason: 'failed', nextPage: 2, error: 'bad request', errorKind: 'bad_request' });
      const ended = { ...series, seriesId: 's3', query: 'q3' };
      await store.commitPage(page(start + 2, { series: ended, spend: [], journal: null, checkpoints: [], dedupe: null, progress: { ...page(0).progress, status: 'ended', reason: 'short' } }));
      const statuses = await store.seriesStatuses('run-1', ['s1', 's2', 's3', 'never']);
      expect(statuses.sort((a, b) => a.seriesId.localeCompare(b.seriesId))).toEqual([
        { seriesId: 's1', status: 'active', reason: null },
        { seriesId: 's2', status: 'ended', reason: 'failed' },
        { seriesId: 's3', status: 'ended', reason: 'short' },
      ]);
      expect(await store.seriesStatuses('run-2', ['s1'])).toEqual([]);
      expect(await store.seriesStatuses('run-1', [])).toEqual([]);
      // The series the run reached, a page at a time in the order of their ids.
      expect(await store.reachedStatuses('run-1', '', 2)).toEqual(statuses.slice(0, 2));
      expect(await store.reachedStatuses('run-1', 's2', 2)).toEqual(statuses.slice(2));
      expect(await store.reachedStatuses('run-2', '', 2)).toEqual([]);
      // The progress of a slice in one read, as `progress` reads each (its stage state included).
      const progresses = await store.seriesProgresses('run-1', ['s1', 's2', 's3', 'never']);
      expect(progresses.sort((a, b) => a.seriesId.localeCompare(b.seriesId))).toEqual([await store.progress('run-1', 's1'), await store.progress('run-1', 's2'), await store.progress('run-1', 's3')]);
      expect(await store.seriesProgresses('run-2', ['s1'])).toEqual([]);
    });

    it('the latest run is the one recorded last, whatever clock wrote its started_at (a machine whose clock is behind)', async () => {
      const store = await open();
      await store.startRun({ runId: 'run-ahead', pipeline: 'p', startedAt: '2026-01-02T01:00:00.000Z', fingerprint: 'f', plan: {}, budget: null });
      await store.finishRun('run-ahead', 'completed', '2026-01-02T01:01:00.000Z', {});
      await store.startRun({ runId: 'run-behind', pipeline: 'p', startedAt: '2026-01-02T00:30:00.000Z', fingerprint: 'f', plan: {}, budget: null });
      expect((await store.latestRun('p'))?.runId).toBe('run-behind');
      expect((await store.runs('p')).map((run) => run.runId)).toEqual(['run-ahead', 'run-behind']);
    });

    it("keeps a run's terms: a reopen without them leaves them, a reopen with them replaces them", async () => {
      const store = await open();
      await store.startRun({ runId: 'run-t', pipeline: 'p', startedAt: '2026-01-01T00:00:00.000Z', fingerprint: 'f', plan: {}, budget: null, terms: { rate: 'unpaced' } });
      expect((await store.latestRun('p'))?.terms).toEqual({ rate: 'unpaced' });
      await store.reopenRun('run-t', null);
      expect((await store.latestRun('p'))?.terms).toEqual({ rate: 'unpaced' });
      await store.reopenRun('run-t', 5, { rate: '5 requests/s' });
      expect(await store.latestRun('p')).toMatchObject({ budget: 5, terms: { rate: '5 requests/s' }, invocations: 3 });
    });

    it("a new run does not see an earlier run's run-scoped dedupe keys, and keeps keys kept for good", async () => {
      const store = await open();
      await startRun(store);
      const start = await store.currentSeq();
      await store.commitPage(page(start + 1, { dedupe: { keys: [{ scope: 'run', key: 'old', runId: 'run-1' }, { scope: 'persistent', key: 'kept', runId: null }], sightings: [] } }));
      // The run ended without forgetting its keys (a distributed run's last two workers finished at once).
      await store.finishRun('run-1', 'completed', '2026-01-01T00:01:00.000Z', {});
      await store.startRun({ runId: 'run-2', pipeline: 'p', startedAt: '2026-01-02T00:00:00.000Z', fingerprint: 'f', plan: { a: 1 }, budget: 10 });
      const keys = store.seenKeys('run-2');
      expect([...(await keys.view(true).seen('run', ['old']))]).toEqual([]);
      expect([...(await keys.view(false).seen('persistent', ['kept']))]).toEqual(['kept']);
    });

    it("writes the rows of a sink on its database, and the sink's checkpoint, in the page's transaction", async () => {
      const store = await open();
      await startRun(store);
      await opened?.results.prepare();
      const start = await store.currentSeq();
      await store.commitPage(page(start + 1, { rows: [opened?.results.rows(['a', 'b', 'c']) as SinkRows] }));
      await store.commitPage(page(start + 2, { rows: [opened?.results.rows([]) as SinkRows] }));
      expect(await opened?.results.read()).toEqual({ n: 3, seq: start + 2 });
    });

    it("appends a page's file bytes just before its transaction, and records each file's new length there as its checkpoint", async () => {
      const store = await open();
      await startRun(store);
      const dir = mkdtempSync(join(tmpdir(), 'webdata-appends-'));
      const [lines, csv] = [join(dir, 'out.jsonl'), join(dir, 'out.csv')];
      writeFileSync(csv, 'h1,h2\r\n');
      const fds = [openSync(lines, 'a'), openSync(csv, 'a')] as const;
      try {
        const appends = (text: string, cells: string[]): FileAppend[] => [
          { sinkId: 'jsonl:out', path: lines, fd: fds[0], shared: false, content: { text } },
          { sinkId: 'csv:out', path: csv, fd: fds[1], shared: false, content: { csv: { delimiter: ',', escape_formulas: false, record_delimiter: 'windows', header: false }, width: 2, cells } },
        ];
        const start = await store.currentSeq();
        expect(await store.commitPage(page(start + 1, { appends: appends('{"a":1}\n', ['a', 'b', 'c', 'd']) }))).toEqual([8, 17]);
        // An empty page appends nothing, and its checkpoints still move on.
        expect(await store.commitPage(page(start + 2, { appends: appends('', []) }))).toEqual([8, 17]);
        expect(readFileSync(lines, 'utf8')).toBe('{"a":1}\n');
        expect(readFileSync(csv, 'utf8')).toBe('h1,h2\r\na,b\r\nc,d\r\n');
        expect(await store.checkpoints.get('jsonl:out')).toEqual({ seq: start + 2, bytes: 8 });
        expect(await store.checkpoints.get('csv:out')).toEqual({ seq: start + 2, bytes: 17 });
        // The checkpoints given as they are go in with them.
        expect(await store.checkpoints.get('csv:out.csv')).toEqual({ seq: start + 2, bytes: 100 * (start + 2) });
      } finally {
        for (const fd of fds) closeSync(fd);
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('writes nothing of a page whose commit fails inside the transaction', async () => {
      const store = await open();
      await startRun(store);
      const start = await store.currentSeq();
      // A sink's rows for a table that is not there: the transaction fails at the last of its writes.
      const error = await rejection(store.commitPage(page(start + 1, { rows: [opened?.results.missing() as SinkRows] })));
      expect(error.message).toMatch(/none/);
      expect(await store.currentSeq()).toBe(start);
      expect(await store.progress('run-1', 's1')).toBeUndefined();
      expect((await store.spendOf('run-1')).requests).toBe(0);
      expect(await journal(store)).toEqual([]);
      expect(await store.checkpoints.get('csv:out.csv')).toBeUndefined();
      expect((await store.seenKeys('run-1').view(true).seen('run', [`key${start + 1}`])).size).toBe(0);
    });

    it('refuses a page whose sequence number another writer took, writing nothing of it', async () => {
      const store = await open();
      await startRun(store);
      const start = await store.currentSeq();
      await store.commitPage(page(start + 1));
      const error = await rejection(store.commitPage(page(start + 1, { series: { ...series, seriesId: 's2' } })));
      expect(error.message).toMatch(/another process/);
      expect(await store.progress('run-1', 's2')).toBeUndefined();
      expect((await store.spendOf('run-1')).spent).toBe(1);
    });

    it("keeps a series' stage states as a snapshot and each page's changes after it, and reads them back applied", async () => {
      const store = await open();
      await startRun(store);
      let seq = await store.currentSeq();
      const commit = (state: PageCommit['progress']['state'], ends = false) =>
        store.commitPage(pageWithState(++seq, state.kind, state.json, ends ? { status: 'ended', reason: 'max_pages' } : {}));
      const stored = async () => (await store.progress('run-1', 's1'))?.state;
      await commit({ kind: 'snapshot', json: JSON.stringify({ dedupe: { a: 1 }, normalize: { next: 2, ranks: { a: 1 } } }) });
      await commit({ kind: 'changes', json: JSON.stringify({ dedupe: [[['b'], 1]], normalize: [[['next'], 3], [['ranks', 'b'], 2]] }) });
      await commit({ kind: 'changes', json: null });
      await commit({ kind: 'changes', json: JSON.stringify({ dedupe: [[['a']], [['__proto__'], 1]], mine: [[[], { list: [1, 2] }]] }) });
      const applied = await stored();
      expect(JSON.parse(JSON.stringify(applied))).toEqual({ dedupe: { b: 1, ['__proto__']: 1 }, normalize: { next: 3, ranks: { a: 1, b: 2 } }, mine: { list: [1, 2] } });
      // Read with a slice of series in one read (the run's close), the same.
      expect(JSON.parse(JSON.stringify((await store.seriesProgresses('run-1', ['s1']))[0]?.state))).toEqual(JSON.parse(JSON.stringify(applied)));
      // "__proto__" is a key like any other, never the prototype.
      expect(Object.getPrototypeOf(applied?.dedupe)).toBeNull();
      // A refused page writes none of its changes.
      await rejection(store.commitPage(pageWithState(seq, 'changes', JSON.stringify({ dedupe: [[['c'], 1]] }))));
      expect(await stored()).toEqual(applied);
      // A snapshot replaces the snapshot and the changes before it.
      await commit({ kind: 'snapshot', json: JSON.stringify({ dedupe: { z: 1 } }) });
      expect(JSON.parse(JSON.stringify(await stored()))).toEqual({ dedupe: { z: 1 } });
      await commit({ kind: 'changes', json: JSON.stringify({ dedupe: [[['y'], 1]] }) });
      expect(JSON.parse(JSON.stringify(await stored()))).toEqual({ dedupe: { z: 1, y: 1 } });
      // The page that ends the series leaves no state behind.
      await commit({ kind: 'snapshot', json: null }, true);
      expect(await stored()).toBeNull();
    });

    it('drops an abandoned run’s stage state changes with its series', async () => {
      const store = await open();
      await startRun(store);
      const start = await store.currentSeq();
      await store.commitPage(pageWithState(start + 1, 'snapshot', '{"d":{}}'));
      await store.commitPage(pageWithState(start + 2, 'changes', '{"d":[[["k"],1]]}'));
      await store.abandonRun('run-1', '2026-01-01T00:01:00.000Z');
      // A run of the same id never comes back; what is checked is that nothing of it is read, or left behind.
      await store.startRun({ runId: 'run-1b', pipeline: 'p', startedAt: '2026-01-02T00:00:00.000Z', fingerprint: 'f', plan: { a: 1 }, budget: 10 });
      expect(await store.progress('run-1', 's1')).toBeUndefined();
      expect(await (opened as StoreUnderTest).count('series_state')).toBe(0);
    });

    it('refuses damaged stage state changes naming the series, and applies none of them', async () => {
      const store = await open();
      await startRun(store);
      const start = await store.currentSeq();
      await store.commitPage(pageWithState(start + 1, 'snapshot', '{"d":{}}'));
      await store.commitPage(pageWithState(start + 2, 'changes', '{"d":[[["__proto__","polluted"],1]]}'));
      await store.commitPage(pageWithState(start + 3, 'changes', '{"d":[["not a path",1]]}'));
      const error = await rejection(store.progress('run-1', 's1'));
      expect(error.message).toMatch(/the stage state of series s1 in the state store is damaged \(a stage state change of "d" is not \[path, value\] with a path of keys\)/);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    it('lets one run of a pipeline hold the store at a time', async () => {
      const store = await open();
      const lease = await store.lease('p');
      expect((await rejection(store.lease('p'))).name).toBe('LeaseHeldError');
      if (implementation.oneRunPerStore) {
        expect((await rejection(store.lease('q'))).message).toMatch(/in use by pipeline "p"/);
      } else {
        // Another pipeline runs beside it.
        await (await store.lease('q')).release();
      }
      await lease.release();
      await (await store.lease('p')).release();
    });

    it('records runs, and abandons one keeping its spend', async () => {
      const store = await open();
      await startRun(store);
      await store.commitPage(page((await store.currentSeq()) + 1));
      expect(await store.latestRun('p')).toMatchObject({ runId: 'run-1', status: 'running', budget: 10, plan: { a: 1 }, invocations: 1 });
      await store.abandonRun('run-1', '2026-01-01T00:01:00.000Z');
      // An abandoned run is no longer the one a next invocation resumes, but stays on record.
      expect(await store.latestRun('p')).toBeUndefined();
      expect((await store.runs('p')).map((run) => [run.runId, run.status])).toEqual([['run-1', 'abandoned']]);
      expect(await store.progress('run-1', 's1')).toBeUndefined();
      expect(await journal(store)).toEqual([]);
      expect((await store.spendOf('run-1')).spent).toBe(1);
    });

    it('ends a series without a page, and keeps spend written on its own', async () => {
      const store = await open();
      await startRun(store);
      await store.spend([{ ...page(1).spend[0]!, status: '503', credits: 0 }]);
      await store.endSeries('run-1', series, { status: 'ended', reason: 'failed', nextPage: 1, error: 'server error', errorKind: 'server' });
      expect(await store.progress('run-1', 's1')).toMatchObject({ status: 'ended', reason: 'failed' });
      expect(await store.failedKinds('run-1')).toEqual({ server: 1 });
      expect((await store.spendOf('run-1')).byStatus).toEqual({ '503': 1 });
      expect(await store.failedSeries('run-1', 10)).toEqual([{ ...series, errorKind: 'server', error: 'server error' }]);
      expect(await store.failedSeries('run-1', 0)).toEqual([]);
    });

    it('a notification is claimed once (one worker sends it), kept pending with its body, then settled without it', async () => {
      const store = await open();
      await startRun(store);
      const key = { runId: 'run-1', invocation: 1, webhook: 'w1' };
      const claim = { ...key, pipeline: 'p', target: 'https://hooks.example/x', event: 'completed', body: '{"a":1}', createdAt: '2026-01-01T00:02:00.000Z' };
      expect(await store.claimNotification(claim)).toBe(true);
      expect(await store.claimNotification({ ...claim, body: '{"a":2}' })).toBe(false);
      // Another end of the same run (a resume), another webhook: each a notification of its own.
      expect(await store.claimNotification({ ...claim, invocation: 2, createdAt: '2026-01-01T00:03:00.000Z' })).toBe(true);
      expect(await store.claimNotification({ ...claim, webhook: 'w2', createdAt: '2026-01-01T00:04:00.000Z' })).toBe(true);
      expect(await store.pendingNotifications('q', 10, STALE)).toEqual([]);
      const pending = await store.pendingNotifications('p', 10, STALE);
      expect(pending.map((n) => [n.invocation, n.webhook])).toEqual([[1, 'w1'], [2, 'w1'], [1, 'w2']]);
      expect(pending[0]).toEqual({ ...claim, status: 'pending', attempts: 0, error: null, updatedAt: claim.createdAt });
      expect(await store.pendingNotifications('p', 1, STALE)).toHaveLength(1);

      // Aborted: still pending, its attempts counted; then delivered by a later invocation, the body gone.
      await store.settleNotification(key, { status: 'pending', attempts: 2, error: 'HTTP 500', at: '2026-01-01T00:05:00.000Z' });
      expect((await store.pendingNotifications('p', 10, STALE))[0]).toMatchObject({ attempts: 2, error: 'HTTP 500', body: '{"a":1}' });
      await store.settleNotification(key, { status: 'delivered', attempts: 1, error: null, at: '2026-01-01T00:06:00.000Z' });
      await store.settleNotification({ ...key, webhook: 'w2' }, { status: 'failed', attempts: 5, error: 'no answer within 100 ms', at: '2026-01-01T00:06:00.000Z' });
      expect((await store.pendingNotifications('p', 10, STALE)).map((n) => [n.invocation, n.webhook])).toEqual([[2, 'w1']]);
      expect(await opened?.count('notifications')).toBe(3);
    });

    it('a notification is taken for delivery once: owed to no other process while it is sent, owed again once the one that took it is stale', async () => {
      const store = await open();
      const key = { runId: 'run-1', invocation: 1, webhook: 'w1' };
      await store.claimNotification({ ...key, pipeline: 'p', target: 'https://hooks.example/x', event: 'completed', body: '{"a":1}', createdAt: '2026-01-01T00:00:00.000Z' });
      const at = '2026-01-01T00:01:00.000Z';
      // Ten processes try at once: one takes it.
      const takes = await Promise.all(Array.from({ length: 10 }, (_, i) => store.takeNotification(key, `2026-01-01T00:01:00.00${i}Z`, '2026-01-01T00:00:00.000Z')));
      expect(takes.filter(Boolean)).toHaveLength(1);
      const taken = `2026-01-01T00:01:00.00${takes.indexOf(true)}Z`;
      // Taken again as of the same moment (an answer lost on the way back): the same taker's.
      expect(await store.takeNotification(key, taken, '2026-01-01T00:00:00.000Z')).toBe(true);
      // While it is sent, nobody else is handed it; once its taker is stale, it is owed again, body and all.
      expect(await store.pendingNotifications('p', 10, at)).toEqual([]);
      expect(await store.pendingNotifications('p', 10, '2026-01-01T00:09:00.000Z')).toMatchObject([{ ...key, status: 'sending', body: '{"a":1}' }]);
      expect(await store.takeNotification(key, '2026-01-01T00:09:00.000Z', '2026-01-01T00:04:00.000Z')).toBe(true);
      // Aborted: pending again, taken by the next; settled: owed to nobody, taken by nobody.
      await store.settleNotification(key, { status: 'pending', attempts: 1, error: 'aborted', at: '2026-01-01T00:10:00.000Z' });
      expect(await store.pendingNotifications('p', 10, '2026-01-01T00:00:00.000Z')).toMatchObject([{ status: 'pending' }]);
      expect(await store.takeNotification(key, '2026-01-01T00:11:00.000Z', '2026-01-01T00:00:00.000Z')).toBe(true);
      await store.settleNotification(key, { status: 'delivered', attempts: 1, error: null, at: '2026-01-01T00:12:00.000Z' });
      expect(await store.takeNotification(key, '2026-01-01T01:00:00.000Z', '2026-01-01T00:59:00.000Z')).toBe(false);
      expect(await store.pendingNotifications('p', 10, '2026-01-01T01:00:00.000Z')).toEqual([]);
    });

    it('claims a scheduled occurrence once, whoever asks and however many at once; settles it; finds it by its run', async () => {
      const store = await open();
      const dueAt = '2026-01-01T06:00:00.000Z';
      // Ten workers claim the same occurrence together: one holds it.
      const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => store.claimOccurrence({ pipeline: 'p', dueAt, outcome: 'claimed', worker: `w${i}` })));
      expect(claims.filter((claim) => claim.result === 'won')).toHaveLength(1);
      expect(claims.filter((claim) => claim.result === 'taken')).toHaveLength(9);
      const winner = `w${claims.findIndex((claim) => claim.result === 'won')}`;
      // Another pipeline's occurrence at the same time is its own.
      expect((await store.claimOccurrence({ pipeline: 'q', dueAt, outcome: 'missed', worker: 'w0', note: 'no worker was up' })).result).toBe('won');
      await store.settleOccurrence('p', dueAt, { outcome: 'started', runId: 'run-9' });
      // Settled again without a run or a note: both stay.
      await store.settleOccurrence('p', dueAt, { outcome: 'resumed' });
      const [row] = await store.occurrences('p');
      expect(row).toMatchObject({ pipeline: 'p', dueAt, outcome: 'resumed', runId: 'run-9', worker: winner, note: null });
      expect(Date.parse(row?.claimedAt ?? '')).not.toBeNaN();
      expect(await store.occurrences('p', { runId: 'run-9' })).toEqual([row]);
      expect(await store.occurrences('p', { runId: 'run-0' })).toEqual([]);
      expect(await store.occurrences('p', { dueAt })).toEqual([row]);
      expect(await store.occurrences('p', { dueAt: '2026-01-01T07:00:00.000Z' })).toEqual([]);
      expect(await store.occurrences('q')).toMatchObject([{ outcome: 'missed', note: 'no worker was up', runId: null }]);
    });

    it('never claims ahead of its clock: an occurrence due later than the tolerance after it is refused, nothing written, the store\'s time said', async () => {
      const store = await open();
      // The store's clock is this machine's here (PostgreSQL's server runs on it): the two agree.
      const now = await store.storeClock();
      expect(Math.abs(now - Date.now())).toBeLessThan(5_000);
      const inAnHour = new Date(now + 3_600_000).toISOString();
      const refused = await store.claimOccurrence({ pipeline: 'p', dueAt: inAnHour, outcome: 'claimed', worker: 'fast' });
      expect(refused.result).toBe('ahead');
      expect(refused.storeTime).toBeGreaterThanOrEqual(now);
      expect(refused.storeTime).toBeLessThan(Date.parse(inAnHour));
      expect(await store.occurrences('p')).toEqual([]);
      // Within the tolerance: a clock a little ahead still claims on time, once.
      const soon = new Date(now + CLAIM_AHEAD_TOLERANCE_MS / 2).toISOString();
      expect((await store.claimOccurrence({ pipeline: 'p', dueAt: soon, outcome: 'claimed', worker: 'w1' })).result).toBe('won');
      expect((await store.claimOccurrence({ pipeline: 'p', dueAt: soon, outcome: 'claimed', worker: 'w2' })).result).toBe('taken');
      const past = new Date(now - 60_000).toISOString();
      expect((await store.claimOccurrence({ pipeline: 'p', dueAt: past, outcome: 'missed', worker: 'w2' })).result).toBe('won');
      // The latest due by a time: a row after it is left out.
      expect((await store.occurrences('p', { limit: 1, dueBy: new Date(now - 1).toISOString() })).map((o) => o.dueAt)).toEqual([past]);
      expect((await store.occurrences('p', { limit: 1, dueBy: soon })).map((o) => o.dueAt)).toEqual([soon]);
      expect((await store.occurrences('p', { limit: 5 })).map((o) => o.dueAt)).toEqual([soon, past]);
      // claimed_at is the store's clock.
      const [row] = await store.occurrences('p', { dueAt: soon });
      expect(Math.abs(Date.parse(row?.claimedAt ?? '') - now)).toBeLessThan(5_000);
    });

    it('lists occurrences latest first, and prunes the oldest that took no run, keeping those with runs', async () => {
      const store = await open();
      const at = (minute: number) => new Date(Date.UTC(2026, 0, 1, 6, minute)).toISOString();
      for (let minute = 0; minute < 6; minute++) {
        const ran = minute === 1 || minute === 4;
        await store.claimOccurrence({ pipeline: 'p', dueAt: at(minute), outcome: ran ? 'started' : 'skipped', worker: 'w' });
        if (ran) await store.settleOccurrence('p', at(minute), { outcome: 'started', runId: `run-${minute}` });
      }
      expect((await store.occurrences('p', { limit: 2 })).map((o) => o.dueAt)).toEqual([at(5), at(4)]);
      await store.pruneOccurrences('p', 2);
      expect((await store.occurrences('p')).map((o) => [o.dueAt, o.outcome])).toEqual([
        [at(5), 'skipped'],
        [at(4), 'started'],
        [at(3), 'skipped'],
        [at(1), 'started'],
      ]);
      // Fewer than `keep`: nothing goes.
      await store.pruneOccurrences('p', 10);
      expect(await store.occurrences('p')).toHaveLength(4);
    });
  });
}

describe('a SQLite state file of an earlier schema', () => {
  it('of schema 2 (runs without terms) is brought to this one: its runs are kept, without terms, until a reopen records them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webdata-store-'));
    try {
      const db = new Database(join(dir, 'state.db'));
      await startRun(sqliteStateStore(db));
      db.exec(`ALTER TABLE runs DROP COLUMN terms; UPDATE webdata_meta SET value = '2' WHERE key = 'state_schema'`);
      db.close();
      const again = new Database(join(dir, 'state.db'));
      const reopened = sqliteStateStore(again);
      expect(again.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get()).toBe(String(STATE_SCHEMA_VERSION));
      expect(await reopened.latestRun('p')).toMatchObject({ runId: 'run-1', budget: 10, terms: null });
      await reopened.reopenRun('run-1', 10, { rate: 'unpaced' });
      expect((await reopened.latestRun('p'))?.terms).toEqual({ rate: 'unpaced' });
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });


  it('is brought to this one (the stage state changes table added, the version marked) and resumes what it held', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webdata-store-'));
    try {
      const db = new Database(join(dir, 'state.db'));
      const store = sqliteStateStore(db);
      await startRun(store);
      await store.commitPage(pageWithState(1, 'snapshot', '{"dedupe":{"a":1}}'));
      // As schema 1 left it: no series_state, and its version.
      db.exec(`DROP TABLE series_state; UPDATE webdata_meta SET value = '1' WHERE key = 'state_schema'`);
      db.close();
      const again = new Database(join(dir, 'state.db'));
      const reopened = sqliteStateStore(again);
      expect(again.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get()).toBe(String(STATE_SCHEMA_VERSION));
      expect(JSON.parse(JSON.stringify((await reopened.progress('run-1', 's1'))?.state))).toEqual({ dedupe: { a: 1 } });
      await reopened.commitPage(pageWithState(2, 'changes', '{"dedupe":[[["b"],1]]}'));
      expect(JSON.parse(JSON.stringify((await reopened.progress('run-1', 's1'))?.state))).toEqual({ dedupe: { a: 1, b: 1 } });
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('of schema 6 gains the ledger\'s key, pipeline and period (null in its rows) and the allowances\' tables', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webdata-store-'));
    try {
      const db = new Database(join(dir, 'state.db'));
      const store = sqliteStateStore(db);
      await startRun(store);
      await store.commitPage(pageWithState(1, 'snapshot', null));
      // As schema 6 left it: the spend table without the columns, no allowances.
      db.exec(`DROP INDEX spend_key_period; DROP TABLE key_allowances; DROP TABLE key_holds; UPDATE webdata_meta SET value = '6' WHERE key = 'state_schema'`);
      for (const column of ['key_fingerprint', 'key_label', 'pipeline', 'period']) db.exec(`ALTER TABLE spend DROP COLUMN ${column}`);
      db.close();
      const again = new Database(join(dir, 'state.db'));
      const reopened = sqliteStateStore(again);
      expect(again.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get()).toBe(String(STATE_SCHEMA_VERSION));
      await reopened.spend([
        {
          runId: 'run-1',
          at: new Date().toISOString(),
          seriesId: 's1',
          path: '/p',
          attempt: 1,
          status: 'timeout',
          credits: 1,
          uncertain: true,
          latencyMs: 1,
          pipeline: 'p',
          key: { fingerprint: 'fp', label: 'fast', period: '2026-11-27', holder: null },
        },
      ]);
      expect(again.prepare(`SELECT key_fingerprint, key_label, pipeline, period FROM spend ORDER BY id`).all()).toEqual([
        { key_fingerprint: null, key_label: null, pipeline: null, period: null },
        { key_fingerprint: 'fp', key_label: 'fast', pipeline: 'p', period: '2026-11-27' },
      ]);
      expect(again.prepare(`SELECT name FROM sqlite_master WHERE name IN ('key_allowances', 'key_holds', 'spend_key_period') ORDER BY name`).pluck().all()).toEqual([
        'key_allowances',
        'key_holds',
        'spend_key_period',
      ]);
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('of schema 2 gains the spend ledger\'s uncommitted mark, its rows counted as committed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webdata-store-'));
    try {
      const db = new Database(join(dir, 'state.db'));
      const store = sqliteStateStore(db);
      await startRun(store);
      await store.commitPage(pageWithState(1, 'snapshot', null));
      // As schema 2 left it: the spend table without the column.
      db.exec(`ALTER TABLE spend DROP COLUMN uncommitted; UPDATE webdata_meta SET value = '2' WHERE key = 'state_schema'`);
      db.close();
      const again = new Database(join(dir, 'state.db'));
      const reopened = sqliteStateStore(again);
      expect(again.prepare(`SELECT value FROM webdata_meta WHERE key = 'state_schema'`).pluck().get()).toBe(String(STATE_SCHEMA_VERSION));
      const before = await reopened.spendOf('run-1');
      await reopened.spend([{ runId: 'run-1', at: new Date().toISOString(), seriesId: 's1', path: '/p', attempt: 1, status: '200', credits: 2, uncertain: false, latencyMs: 1, uncommitted: true }]);
      expect(await reopened.spendOf('run-1')).toMatchObject({ spent: before.spent + 2, uncommitted: 2 });
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
