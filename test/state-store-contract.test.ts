import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { PageCommit, StateStore } from '../src/state/interfaces.ts';
import { sqliteStateStore } from '../src/state/sqlite/state-store.ts';
import { postgresTarget } from '../src/postgres/target.ts';
import { postgresStateStore } from '../src/state/postgres/store.ts';
import { rejection } from './helpers.ts';
import { postgresAvailable, testDatabase } from './pg.ts';

/**
 * What every state store must do, whatever holds it (DESIGN §4, §9): the runner relies on these and nothing else.
 * Each implementation joins the list below and passes the same cases.
 */
interface StoreUnderTest {
  store: StateStore;
  close(): Promise<void>;
}

const implementations: { name: string; available: boolean; oneRunPerStore: boolean; open(): Promise<StoreUnderTest> }[] = [
  {
    name: 'sqlite',
    available: true,
    // A SQLite file is one pipeline's: its journal's sequence is the file's.
    oneRunPerStore: true,
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'webdata-store-'));
      const db = new Database(join(dir, 'state.db'));
      return {
        store: sqliteStateStore(db),
        close: async () => {
          db.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
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
        close: async () => {
          await pool.end();
          await database.drop();
        },
      };
    },
  },
];

const series = { seriesId: 's1', endpoint: 'search', query: 'q', country: 'us', lang: 'en' };

function page(seq: number, overrides: Partial<PageCommit> = {}): PageCommit {
  return {
    runId: 'run-1',
    seq,
    series,
    progress: { status: 'active', reason: null, nextPage: seq + 1, served: 10, written: 8, duplicates: 2, digest: `d${seq}`, noNew: 0, cursor: null, state: null },
    spend: [{ runId: 'run-1', at: '2026-01-01T00:00:00.000Z', seriesId: 's1', path: '/searchengine/search', attempt: 1, status: '200', credits: 1, uncertain: false, latencyMs: 5 }],
    journal: { seq, runId: 'run-1', pageKey: `k${seq}`, seriesId: 's1', number: seq, meta: '{"page":1}', output: '[{"title":"a"}]', raw: null },
    checkpoints: [{ sinkId: 'csv:out.csv', checkpoint: { seq, bytes: 100 * seq } }],
    dedupe: { keys: [{ scope: 'run', key: `key${seq}`, runId: 'run-1' }], sightings: [] },
    ...overrides,
  };
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

    it('writes nothing of a page whose commit fails inside the transaction', async () => {
      const store = await open();
      await startRun(store);
      const start = await store.currentSeq();
      const error = await rejection(
        store.commitPage(page(start + 1), () => {
          throw new Error('sink failed');
        }),
      );
      expect(error.message).toBe('sink failed');
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
    });
  });
}
