import pg from 'pg';
import { expect, it } from 'vitest';
import { openBoss } from '../../src/distributed/boss.ts';
import { PLAN_INSERTS, planRun } from '../../src/distributed/plan-run.ts';
import type { Series } from '../../src/pipeline/page.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';

// Planning at scale (issue 43, item 1; src/distributed/plan-run.ts): the planner streams the plan, never holding it.
// A resume's planning read the ids of every series over in one statement into a set (a million ids, for a run of a
// million series mostly done); it now asks which are over a batch of the plan at a time.

const RUN = 'run-resumed';
const SERIES = 30_000;
const OVER = 29_000;

function* plan(): Generator<Series> {
  for (let i = 0; i < SERIES; i += 1) yield { id: `search|q${i}|us|`, endpoint: 'search', query: `q${i}`, country: 'us', lang: '' };
}

/** Has the pool remember the most rows one of its statements gave back since `most` was last reset. */
function counting(pool: pg.Pool): { most: number } {
  const seen = { most: 0 };
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  pool.query = ((...args: unknown[]) => {
    const result = query(...args);
    if (result instanceof Promise) {
      result.then(
        (answer: { rows?: unknown[] } | { rows?: unknown[] }[]) => {
          for (const one of Array.isArray(answer) ? answer : [answer]) seen.most = Math.max(seen.most, one.rows?.length ?? 0);
        },
        () => undefined,
      );
    }
    return result;
  }) as typeof pool.query;
  return seen;
}

describePostgres('planning a run resumed', () => {
  it('queues the series not over, having asked for those over a batch at a time (never all of them at once)', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 6 });
    const seen = counting(pool);
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'p' });
      await store.startRun({ runId: RUN, pipeline: 'p', startedAt: new Date().toISOString(), fingerprint: 'f', plan: {}, budget: null });
      // The first 29,000 series of the plan ended in an earlier invocation.
      await pool.query(
        `INSERT INTO webdata.series (run_id, series_id, endpoint, query, country, lang, status, reason)
         SELECT $1, 'search|q' || i || '|us|', 'search', 'q' || i, 'us', '', 'ended', 'empty' FROM generate_series(0, $2::int - 1) AS i`,
        [RUN, OVER],
      );
      const boss = await openBoss(pool, 'webdata');
      seen.most = 0;
      const queue = await planRun(boss, store, { pipeline: 'p', runId: RUN, planningNumber: 2, series: plan(), budget: null, retryFailed: false, spentBefore: 0 });
      // Before: the 29,000 ids over in one answer.
      expect(seen.most).toBeLessThanOrEqual(PLAN_INSERTS.batch);
      const queued = await pool.query<{ series: string }>(`SELECT data->>'series' AS series FROM webdata_jobs.job WHERE name = $1`, [queue]);
      const ids = new Set(queued.rows.map((row) => row.series));
      expect(ids.size).toBe(SERIES - OVER);
      expect(ids.has(`search|q${OVER}|us|`)).toBe(true);
      expect(ids.has(`search|q${OVER - 1}|us|`)).toBe(false);
      await boss.stop({ graceful: false, close: false });
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
