import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dedupe, definePipeline, LeaseHeldError, normalize, searchPages, toCsv, toSqlite } from '../../src/index.ts';
import type { Gate } from '../../src/simulator/index.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { CRASH_MATRIX, delays, runChild, stableCsv, stableSqlite } from './resume-helpers.ts';

const SIM = { seed: 21, latencyMs: { min: 2, max: 12 } } as const;
const PLAN = { queries: ['espresso', 'kettle', 'grinder', 'milk frother', 'tamper'], countries: ['us', 'gb'], maxPages: 4, concurrency: 4 };

/** An uninterrupted run of the plan: what every interrupted-and-resumed run must end up equal to. */
async function baseline(extra: Record<string, unknown> = {}) {
  await using sim = await simulator(SIM);
  using dir = workdir();
  const result = await runChild({ ...PLAN, ...extra, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'csv', 'csv2'] }).done;
  expect(result.code).toBe(0);
  return {
    sqlite: stableSqlite(dir.path('out.sqlite')),
    csv: stableCsv(dir.path('out.csv')),
    pages: result.summary?.pages.fetched ?? 0,
    debited: sim.stats().credits.main?.debited ?? 0,
  };
}

function integrity(path: string) {
  // A process killed before it created its database left nothing to check.
  if (existsSync(path)) expect(sqliteRows(path, 'PRAGMA integrity_check')).toEqual([{ integrity_check: 'ok' }]);
}

describe('a killed run, resumed, ends exactly as an uninterrupted one', () => {
  let expected: Awaited<ReturnType<typeof baseline>> | undefined;
  const reference = async () => (expected ??= await baseline());

  for (const [point, n] of CRASH_MATRIX) {
    it(`SIGKILL at ${point} (#${n})`, async () => {
      const want = await reference();
      await using sim = await simulator(SIM);
      using dir = workdir();
      const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'csv', 'csv2', 'sqlite2'] };
      const killed = await runChild(spec, { WEBDATA_CRASH_AT: `${point}:${n}` }).done;
      expect(killed.signal).toBe('SIGKILL');
      integrity(dir.path('out.sqlite'));

      const resumed = await runChild(spec).done;
      expect(resumed.code).toBe(0);
      expect(resumed.summary?.status).toBe('completed');
      if (point === 'between-sinks' || point === 'after-commit') {
        // The committed page the SQLite sink in another file lacked was re-delivered from the journal, not fetched
        // again. (File sinks commit with the page itself, so they never lack one.)
        expect(resumed.replayed).toBeGreaterThan(0);
      }
      expect(stableSqlite(dir.path('out2.sqlite'))).toEqual(want.sqlite);
      expect(stableSqlite(dir.path('out.sqlite'))).toEqual(want.sqlite);
      expect(stableCsv(dir.path('out.csv'))).toEqual(want.csv);
      expect(stableCsv(dir.path('out2.csv'))).toEqual(want.csv);
      // No page paid twice beyond the requests in flight at the kill.
      expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(want.debited + PLAN.concurrency);
      // The header and BOM are written once.
      expect(readFileSync(dir.path('out.csv'), 'utf8').match(/run_id,query/g)).toHaveLength(1);
      // Once every sink holds every page, the journal is empty.
      expect(sqliteRows(dir.path('out.sqlite'), 'SELECT COUNT(*) AS n FROM pages')).toEqual([{ n: 0 }]);
    });
  }

  it('with global dedupe: keys and sightings commit with their page, so a kill inside the transaction leaves none behind', async () => {
    const want = await baseline({ dedupeScope: 'global' });
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'csv', 'csv2'], dedupeScope: 'global' };
    expect((await runChild(spec, { WEBDATA_CRASH_AT: 'page-transaction:6' }).done).signal).toBe('SIGKILL');
    expect((await runChild(spec).done).code).toBe(0);
    // Which series keeps a shared item depends on the order pages commit in (concurrency), in any two runs; what
    // must hold is that every key is kept exactly once and the same keys are kept.
    const keys = (rows: string[]) => rows.map((row) => JSON.parse(row)[10]).sort();
    const got = stableSqlite(dir.path('out.sqlite'));
    expect(keys(got)).toEqual(keys(want.sqlite));
    expect(new Set(keys(got)).size).toBe(got.length);
    expect(stableCsv(dir.path('out.csv'))).toHaveLength(want.csv.length);
    const sightings = sqliteRows(dir.path('out.sqlite'), 'SELECT COUNT(*) AS n, SUM(first) AS firsts FROM sightings')[0];
    expect(sightings?.firsts).toBe(want.sqlite.length);
  });

  it('long series killed mid-way resume their ranks and dedupe keys from a snapshot and the changes committed after it', async () => {
    const long = { maxPages: 12, queries: ['espresso', 'kettle'] };
    const want = await baseline(long);
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, ...long, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'csv'] };
    expect((await runChild(spec, { WEBDATA_CRASH_AT: 'page-transaction:14' }).done).signal).toBe('SIGKILL');
    // What the resumed series build on: snapshots, and pages' changes after them (not the whole state every page).
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT COUNT(*) AS n FROM series_state')[0]?.n).toBeGreaterThan(0);
    expect((await runChild(spec).done).code).toBe(0);
    expect(stableSqlite(dir.path('out.sqlite'))).toEqual(want.sqlite);
    expect(stableCsv(dir.path('out.csv'))).toEqual(want.csv);
  });

  it('SIGKILL at random moments, again and again, then resumed to the end', async () => {
    const want = await reference();
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'csv', 'csv2', 'sqlite2'] };
    const next = delays(7);
    let kills = 0;
    let finished = false;
    // The first invocation cannot end on its own (the last query is held until it is killed): at least one kill
    // lands, however fast the machine runs the plan.
    let held: Gate | undefined = sim.park({ q: 'tamper' });
    // Kill at seeded random moments until an invocation gets to the end on its own.
    for (let attempt = 0; attempt < 12 && !finished; attempt++) {
      const invocation = runChild(spec);
      const timer = setTimeout(() => invocation.child.kill('SIGKILL'), next(120, 450));
      const result = await invocation.done;
      clearTimeout(timer);
      held?.release();
      held = undefined;
      if (result.signal === 'SIGKILL') {
        kills += 1;
        integrity(dir.path('out.sqlite'));
      } else {
        expect(result.code).toBe(0);
        finished = true;
      }
    }
    if (!finished) expect((await runChild(spec).done).code).toBe(0);
    expect(kills).toBeGreaterThan(0);
    // One run, resumed after every kill, equal to the uninterrupted one.
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT status FROM runs')).toEqual([{ status: 'completed' }]);
    expect(stableSqlite(dir.path('out.sqlite'))).toEqual(want.sqlite);
    expect(stableCsv(dir.path('out.csv'))).toEqual(want.csv);
    expect(stableCsv(dir.path('out2.csv'))).toEqual(want.csv);
    expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(want.debited + kills * PLAN.concurrency);
  });
});

describe('the life of a run', () => {
  it('a finished run makes the next invocation a new run; runs accumulate in the same outputs', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, queries: ['one'], baseUrl: sim.url, dir: dir.dir };
    const first = await runChild(spec).done;
    const second = await runChild(spec).done;
    expect(first.summary?.runId).not.toBe(second.summary?.runId);
    const runs = sqliteRows(dir.path('out.sqlite'), 'SELECT status FROM runs');
    expect(runs).toEqual([{ status: 'completed' }, { status: 'completed' }]);
    const perRun = sqliteRows(dir.path('out.sqlite'), 'SELECT run_id, COUNT(*) AS n FROM results GROUP BY run_id');
    expect(perRun).toHaveLength(2);
    expect(perRun[0]?.n).toBe(perRun[1]?.n);
  });

  it('the first SIGINT stops gracefully (answers in flight committed); the next invocation resumes', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir };
    // The last query is held by the simulator: the run cannot end before the signal, and has requests in flight at it.
    const held = sim.park({ q: 'tamper' });
    const invocation = runChild(spec);
    await invocation.whileRunning(Promise.all([invocation.pagesCommitted(3), held.reached()]));
    invocation.child.kill('SIGINT');
    // Their answers come once the stop is under way: they must be committed, and nothing new sent.
    await invocation.printed('SIGINT: stopping');
    held.release();
    const stopped = await invocation.done;
    expect(stopped.code).toBe(0);
    expect(stopped.summary?.status).toBe('interrupted');
    expect(stopped.stderr).toContain('SIGINT: stopping');
    // Every page the server answered was committed: paid once, kept.
    expect(sim.stats().byStatus['200']).toBe(stopped.summary?.pages.fetched);
    const resumed = await runChild(spec).done;
    expect(resumed.summary).toMatchObject({ status: 'completed', runId: stopped.summary?.runId });
    expect(sim.stats().byStatus['200']).toBe(resumed.summary?.pages.fetched);
  });

  it('a second SIGINT aborts: requests in flight are cancelled, what was committed stays', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir };
    // The last query's requests are held by the simulator: in flight when the run aborts, however fast it runs.
    const held = sim.park({ q: 'tamper' });
    const invocation = runChild(spec);
    await invocation.whileRunning(Promise.all([invocation.pagesCommitted(1), held.reached()]));
    invocation.child.kill('SIGINT');
    // The second signal once the first is handled (two sent at once can arrive as one), while the stop waits for the
    // held answers.
    await invocation.printed('SIGINT: stopping');
    expect(held.waiting).toBeGreaterThan(0);
    invocation.child.kill('SIGINT');
    const aborted = await invocation.done;
    held.release();
    expect(aborted.stderr).toContain('aborting');
    expect(aborted.summary?.status).toBe('interrupted');
    integrity(dir.path('out.sqlite'));
    const resumed = await runChild(spec).done;
    expect(resumed.summary?.status).toBe('completed');
  });

  it('the budget caps a run across its resumes; --resume with a new cap continues a budget-stopped run', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, budget: 12, concurrency: 2 };
    // Killed once its fourth page is committed: at that point, not at a moment a fast run could already have spent
    // the budget and ended.
    expect((await runChild(spec, { WEBDATA_CRASH_AT: 'after-commit:4' }).done).signal).toBe('SIGKILL');
    const resumed = await runChild(spec).done;
    expect(resumed.summary).toMatchObject({ status: 'budget', credits: { budget: 12 } });
    expect(resumed.summary?.credits.spent).toBeLessThanOrEqual(12);
    // The server charged at most the budget plus what was in flight at the kill.
    expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(12 + 2);

    const refused = await runChild({ ...spec, resume: true }).done;
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('resume it with a larger total cap (`budget: { maxCredits: N }`, N > ');

    const more = await runChild({ ...spec, resume: true, budgetOverride: 20 }).done;
    expect(more.summary).toMatchObject({ runId: resumed.summary?.runId, credits: { budget: 20 } });
    expect(more.summary?.credits.spent).toBeGreaterThan(12);
    expect(more.summary?.credits.spent).toBeLessThanOrEqual(20);
  });

  it('--resume of a run with failed series retries only those', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    sim.inject({ fault: 'status', status: 400, match: { q: 'kettle' }, times: 1 });
    const spec = { ...PLAN, queries: ['espresso', 'kettle'], countries: ['us'], baseUrl: sim.url, dir: dir.dir };
    const first = await runChild(spec).done;
    expect(first.summary).toMatchObject({ status: 'failed_series', series: { failed: 1, completed: 1 } });
    const before = sim.log().length;
    const retried = await runChild({ ...spec, resume: true }).done;
    expect(retried.summary).toMatchObject({ status: 'completed', runId: first.summary?.runId, series: { failed: 0, completed: 2 } });
    const queries = new Set(sim.log().slice(before).map((entry) => new URLSearchParams(entry.query).get('q')));
    expect(queries).toEqual(new Set(['kettle']));
  });

  it('resuming with a different plan is refused, saying what changed and what to do; --fresh abandons the old run', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir };
    // Killed once its third page is committed (not at a moment the run could already have completed).
    expect((await runChild(spec, { WEBDATA_CRASH_AT: 'after-commit:3' }).done).signal).toBe('SIGKILL');
    const abandonedRun = sqliteRows(dir.path('out.sqlite'), 'SELECT run_id FROM runs')[0]?.run_id;
    const csvBefore = readFileSync(dir.path('out.csv'), 'utf8');

    const changed = { ...spec, queries: [...PLAN.queries.slice(1), 'scale'], maxPages: 2 };
    const refused = await runChild(changed).done;
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('queries: added "scale", removed "espresso"');
    expect(refused.stderr).toContain('maxPages: 4 → 2');
    // The library speaks of its options; the command line translates them into flags.
    expect(refused.stderr).toContain('run with `fresh: true` to abandon it');
    expect(refused.stderr).not.toContain('--fresh');
    // Refused before anything was sent or written.
    expect(readFileSync(dir.path('out.csv'), 'utf8')).toBe(csvBefore);

    const fresh = await runChild({ ...changed, fresh: true }).done;
    expect(fresh.summary?.status).toBe('completed');
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT status FROM runs ORDER BY started_at').map((r) => r.status)).toEqual(['abandoned', 'completed']);
    expect(sqliteRows(dir.path('out.sqlite'), `SELECT COUNT(*) AS n FROM results WHERE run_id = '${abandonedRun}'`)).toEqual([{ n: 0 }]);
    const csvRunIds = new Set(readFileSync(dir.path('out.csv'), 'utf8').split('\r\n').slice(1).filter(Boolean).map((line) => line.split(',')[0]));
    expect(csvRunIds).toEqual(new Set([fresh.summary?.runId]));
  });

  it('resuming with other credit weights, stages or sinks is refused, naming what changed (they decide what is paid and where rows go); another rate is not', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir };
    expect((await runChild(spec, { WEBDATA_CRASH_AT: 'after-commit:3' }).done).signal).toBe('SIGKILL');
    const csvBefore = readFileSync(dir.path('out.csv'), 'utf8');
    const sent = sim.log().length;
    for (const [change, named] of [
      [{ weights: { '/searchengine/search': 0 } }, 'credit weights: {} → {"/searchengine/search":0}'],
      [{ dedupeScope: 'query' }, '"scope":"query"'],
      [{ sinks: ['sqlite', 'csv2'] }, 'out2.csv'],
    ] as const) {
      const refused = await runChild({ ...spec, ...change }).done;
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('RunLifecycleError');
      expect(refused.stderr).toContain(named);
      expect(refused.stderr).toContain('run with `fresh: true` to abandon it');
    }
    // Refused before anything was sent or written.
    expect(sim.log().length).toBe(sent);
    expect(readFileSync(dir.path('out.csv'), 'utf8')).toBe(csvBefore);
    expect(existsSync(dir.path('out2.csv'))).toBe(false);
    // The rate says how fast, not what is paid or where rows go: it may change between resumes.
    const resumed = await runChild({ ...spec, requestsPerSecond: 500 }).done;
    expect(resumed.summary?.status).toBe('completed');
  });

  it('a second concurrent run of the same pipeline is refused; a dead holder’s lease is taken over', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const pipeline = () =>
      definePipeline({
        name: 'leased',
        source: searchPages({ queries: ['a', 'b'], maxPages: 2 }),
        stages: [normalize(), dedupe()],
        sinks: [toSqlite({ path: dir.path('l.sqlite') }), toCsv({ path: dir.path('l.csv') })],
      });
    // The first holds the lease once it has sent something; the simulator holds its requests until the second has
    // been refused, so that the first cannot finish (and let the lease go) however long the second takes to start.
    const held = sim.park();
    const first = runOn(sim, pipeline());
    await Promise.race([held.reached(), first.then(() => Promise.reject(new Error('the first run ended before it sent anything')))]);
    const second = await runOn(sim, pipeline()).catch((e: unknown) => e);
    held.release();
    expect(second).toBeInstanceOf(LeaseHeldError);
    expect(String(second)).toContain(`pid ${process.pid}`);
    expect((await first).status).toBe('completed');

    // A holder killed with SIGKILL never releases its lease: the next run sees the process gone and takes over.
    const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, name: 'dead-holder' };
    // Killed at its first commit, holding the lease (not at a moment it could already have finished and let it go).
    const doomed = runChild(spec, { WEBDATA_CRASH_AT: 'after-commit:1' });
    expect((await doomed.done).signal).toBe('SIGKILL');
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT pid FROM lease')).toEqual([{ pid: doomed.child.pid }]);
    const next = await runChild(spec).done;
    expect(next.summary?.status).toBe('completed');
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT COUNT(*) AS n FROM lease')).toEqual([{ n: 0 }]);
  });

  it('the journal can be kept, with every committed page', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const result = await runChild({ ...PLAN, queries: ['one'], baseUrl: sim.url, dir: dir.dir, keepJournal: true }).done;
    const journal = sqliteRows(dir.path('out.sqlite'), 'SELECT page_key, output FROM pages ORDER BY seq');
    expect(journal).toHaveLength(result.summary?.pages.fetched ?? -1);
  });

  it('the spend ledger has one row per request', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    sim.inject({ fault: 'status', status: 503, times: 1 });
    const result = await runOn(sim, {
      name: 'ledger',
      source: searchPages({ queries: ['a'], maxPages: 2 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('s.sqlite') })],
      retry: { baseDelayMs: 1 },
    });
    const ledger = sqliteRows(dir.path('s.sqlite'), 'SELECT status, credits, uncertain, attempt FROM spend ORDER BY id');
    expect(ledger).toEqual([
      { status: '503', credits: 0, uncertain: 0, attempt: 1 },
      { status: '200', credits: 1, uncertain: 0, attempt: 2 },
      { status: '200', credits: 1, uncertain: 0, attempt: 1 },
    ]);
    expect(result.requests).toEqual({ total: 3, byStatus: { '200': 2, '503': 1 } });
  });
});

