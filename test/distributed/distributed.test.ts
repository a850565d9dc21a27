import { expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type ChildResult, runChild, stableCsv, stableJsonl } from '../run/resume-helpers.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { PgBoss } from 'pg-boss';
import { SEARCH_PATH } from '../../src/client/client.ts';
import { cli, config, envFor, type Result, startCli } from '../cli-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

const SIM = { seed: 41, latencyMs: { min: 5, max: 20 } } as const;
const QUERIES = Array.from({ length: 12 }, (_, i) => `query ${i}`);
const PLAN = { queries: QUERIES, countries: ['us', 'gb'], maxPages: 4, concurrency: 2, sinks: ['postgres'] };

/** A table's rows as comparable text: the columns that do not vary between runs. */
async function stableTable(url: string, table: string): Promise<string[]> {
  const rows = await sql(url, `SELECT query, country, lang, page, position, rank, title, url, domain, snippet, dedupe_key FROM ${table}`);
  return rows.map((row) => JSON.stringify(Object.values(row))).sort();
}

/** A test's simulator, directory and database, and the plan's spec on them (with `extra`); the database dropped after. */
async function onDatabase(
  extra: Record<string, unknown>,
  test: (setup: { sim: Simulator; dir: ReturnType<typeof workdir>; db: Awaited<ReturnType<typeof testDatabase>>; spec: Record<string, unknown> }) => Promise<void>,
): Promise<void> {
  await using sim = await simulator(SIM);
  using dir = workdir();
  const db = await testDatabase();
  try {
    await test({ sim, dir, db, spec: { ...PLAN, ...extra, baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url } });
  } finally {
    await db.drop();
  }
}

describePostgres('a distributed run: many workers share one run on PostgreSQL', () => {
  it('three workers complete a run whose rows equal one process running it alone; each page is paid once', () =>
    againstOneProcess({}, async ({ single, expected, spec, sim, url }) => {
      expect(single.stderr).not.toContain('ERROR');
      expect(single.code).toBe(0);
      expect(single.summary?.status).toBe('completed');
      expect(single.summary?.worker?.pages).toBe(single.summary?.pages.fetched);

      // Three workers started together on the same pipeline and database.
      const results = await Promise.all([runChild(spec).done, runChild(spec).done, runChild(spec).done]);
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.code).toBe(0);
        expect(result.summary?.status).toBe('completed');
      }
      const runIds = new Set(results.map((result) => result.summary?.runId));
      expect(runIds.size).toBe(1);
      // The work was shared, and every page committed once: the shares add up to the run's pages.
      const shares = results.map((result) => result.summary?.worker?.pages ?? 0);
      expect(shares.reduce((a, b) => a + b, 0)).toBe(single.summary?.pages.fetched);
      expect(await stableTable(url, 'results')).toEqual(expected.rows);
      expect(sim.stats().credits.main?.debited).toBe(expected.debited);
      const workers = await sql(url, `SELECT status, stopped_at IS NOT NULL AS stopped FROM webdata.workers`);
      expect(workers).toHaveLength(3);
      expect(workers.every((w) => w.stopped === true)).toBe(true);
      // How each series ended is recorded beside the rows, by whoever left the run last: every one complete.
      const outcomes = await sql(url, `SELECT count(*)::int AS n, min(complete) AS least FROM public.results_outcomes WHERE run_id = $1`, [[...runIds][0]]);
      expect(outcomes).toEqual([{ n: single.summary?.series.total, least: 1 }]);
    }));

  it('a worker killed with SIGKILL mid-run: the others take its series over and complete the run; it cost at most its requests in flight', () =>
    againstOneProcess({}, async ({ single, expected, spec, sim, url }) => {
      expect(single.code).toBe(0);
      const victim = runChild(spec);
      const others = [runChild(spec), runChild(spec)];
      // Killed once it has committed pages, so that it holds series part way, while the others work.
      await victim.pagesCommitted(3);
      victim.child.kill('SIGKILL');
      expect((await victim.done).signal).toBe('SIGKILL');
      const results = await Promise.all(others.map((other) => other.done));
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.code).toBe(0);
        expect(result.summary?.status).toBe('completed');
      }
      expect(await stableTable(url, 'results')).toEqual(expected.rows);
      // Paid twice: at most the requests the victim had in flight (its concurrency).
      expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(expected.debited + PLAN.concurrency);
    }));

  it('per-worker files: each worker writes its own CSV and JSONL; one killed between a page\'s bytes and its commit has its file cut back; together they hold the rows once', () =>
    againstOneProcess({ sinks: ['postgres', 'csvPerWorker', 'jsonlPerWorker'] }, async ({ single, expected, spec, sim, url, dir }) => {
      expect(single.code, single.stderr).toBe(0);
      expect(single.summary?.status).toBe('completed');
      // Killed the 5th time a file holds a page's bytes that its transaction has not committed yet.
      const victim = runChild(spec, { WEBDATA_CRASH_AT: 'file-before-checkpoint:5' });
      // The others start once the victim holds series part way: started together, on a loaded machine they could page
      // every series before the victim reached its fifth page.
      await victim.pagesCommitted(2);
      const others = [runChild(spec), runChild(spec)];
      expect((await victim.done).signal).toBe('SIGKILL');
      for (const result of await Promise.all(others.map((other) => other.done))) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.summary?.status).toBe('completed');
      }
      expect(await stableTable(url, 'results')).toEqual(expected.rows);
      const csv = workerFileRows(dir, 'csv');
      const jsonl = workerFileRows(dir, 'jsonl');
      // Two or three files: a worker that starts after the victim died may take its slot (and cut its file back at once).
      expect(csv.files.length).toBeGreaterThanOrEqual(2);
      expect(jsonl.files.length).toBe(csv.files.length);
      expect(csv.rows).toEqual(blanksAsNull(expected.rows));
      expect(jsonl.rows).toEqual(blanksAsNull(expected.rows));
      expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(expected.debited + PLAN.concurrency);
    }));

  it('--fresh on a run with per-worker files takes the abandoned run\'s rows out of every worker\'s file', () =>
    onDatabase({ sinks: ['postgres', 'csvPerWorker'] }, async ({ dir, db, spec }) => {
      // Two workers commit pages, then both stop: the run is left unfinished, with rows in both files.
      const workers = [runChild(spec), runChild(spec)];
      await Promise.all(workers.map((worker) => worker.pagesCommitted(2)));
      for (const worker of workers) worker.child.kill('SIGTERM');
      for (const worker of workers) expect((await worker.done).summary?.status).toBe('interrupted');
      const abandoned = workerFileRows(dir.dir, 'csv');
      expect(abandoned.files).toHaveLength(2);
      expect(abandoned.rows.length).toBeGreaterThan(0);
      // One process starts afresh: both files lose the abandoned run's rows, and hold the new run's once.
      const fresh = await runChild({ ...spec, fresh: true }).done;
      expect(fresh.stderr).not.toContain('ERROR');
      expect(fresh.summary?.status).toBe('completed');
      const after = workerFileRows(dir.dir, 'csv');
      expect(after.rows).toEqual(blanksAsNull(await stableTable(db.url, 'results')));
      expect(await sql(db.url, 'SELECT DISTINCT run_id FROM results')).toEqual([{ run_id: fresh.summary?.runId }]);
    }));

  it("a budget below the run's need, over three workers: the simulator debits exactly the budget, never more", () =>
    onDatabase({ budget: 31 }, async ({ sim, db, spec }) => {
      const results = await Promise.all([runChild(spec).done, runChild(spec).done, runChild(spec).done]);
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.summary?.status).toBe('budget');
      }
      expect(sim.stats().credits.main?.debited).toBe(31);
      const [limits] = await sql(db.url, 'SELECT spent, reserved FROM webdata.run_limits');
      expect(limits).toEqual({ spent: 31, reserved: 0 });
    }));

  it('a worker frozen (SIGSTOP) past its heartbeat, then resumed, writes nothing another worker committed: it learns it lost the series', () =>
    againstOneProcess({ sinks: ['postgres', 'csvPerWorker'] }, async ({ single, expected, spec, sim, url, dir }) => {
      expect(single.code).toBe(0);
      // The first worker takes the first series; its first request is held until the worker is frozen.
      const gate = sim.park({ q: 'query 0' });
      const frozen = runChild(spec);
      await frozen.whileRunning(gate.reached(1));
      frozen.child.kill('SIGSTOP');
      gate.release();
      // Another worker does the whole run, the frozen one's series too once their jobs' heartbeat lapsed.
      const other = await runChild(spec).done;
      expect(other.stderr).not.toContain('ERROR');
      expect(other.summary?.status).toBe('completed');
      frozen.child.kill('SIGCONT');
      const late = await frozen.done;
      expect(late.stderr).not.toContain('ERROR');
      expect(late.code).toBe(0);
      // Its answer came while it was frozen: the page it made was refused, and it dropped the series.
      expect(late.stderr).toContain('"reason":"lost"');
      expect(late.summary?.status).toBe('completed');
      expect(await stableTable(url, 'results')).toEqual(expected.rows);
      // The refused page's rows were written to the late worker's own file before its commit: they were taken back.
      const files = workerFileRows(dir, 'csv');
      expect(files.files).toHaveLength(2);
      expect(files.rows).toEqual(blanksAsNull(expected.rows));
      expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual(expected.debited + PLAN.concurrency);
    }));

  it('the leader (who learns the rate) killed: another worker leads within a heartbeat, and the run completes', async () => {
    await using sim = await simulator({ ...SIM, latencyMs: { min: 60, max: 90 } });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const spec = { ...PLAN, baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url };
      const workers = [runChild(spec), runChild(spec)];
      await Promise.all(workers.map((worker) => worker.pagesCommitted(1)));
      const leaderPid = await until(async () => (await sql(db.url, 'SELECT pid FROM webdata.workers WHERE leader'))[0]?.pid as number | undefined);
      const [leader, follower] = workers[0]?.child.pid === leaderPid ? workers : [...workers].reverse();
      leader?.child.kill('SIGKILL');
      const next = await until(async () => (await sql(db.url, 'SELECT pid FROM webdata.workers WHERE leader AND pid <> $1', [leaderPid]))[0]?.pid as number | undefined);
      expect(next).toBe(follower?.child.pid);
      const finished = await follower?.done;
      expect(finished?.summary?.status).toBe('completed');
    } finally {
      await db.drop();
    }
  });
  it('a 401 seen by one worker stops them all: every worker exits 3, and the run resumes once the key is fixed', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const db = await testDatabase();
    try {
      // One request answered 401 (a key revoked and restored, say): only one worker sees it; the others hear it from the run.
      sim.inject({ fault: 'status', status: 401, after: 12, times: 1 });
      const file = config(dir.dir, { name: 'auth', sinks: [{ type: 'postgres', table: 'results', url: db.url }], state: { url: db.url }, rate: { concurrency: 2 } }, { queries: QUERIES, maxPages: 4 });
      const results = await Promise.all([1, 2, 3].map(() => cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) })));
      for (const result of results) {
        expect(result.code, result.stderr).toBe(3);
        expect((JSON.parse(result.stdout) as { reason: string }).reason).toBe('unauthorized');
      }
      const resumed = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect((JSON.parse(resumed.stdout) as { status: string; runId: string }).runId).toBe((JSON.parse(results[0]?.stdout ?? '{}') as { runId: string }).runId);
    } finally {
      await db.drop();
    }
  });
  it('status shows the run at work and its workers (alive, leader, pages), then the run completed and its workers gone', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, { name: 'watched', sinks: [{ type: 'postgres', table: 'results', url: db.url }], state: { url: db.url }, rate: { concurrency: 2 } }, { queries: QUERIES, maxPages: 4 });
      const gate = sim.park({ q: 'query 5' });
      const workers = [startCli(['run', file], { cwd: dir.dir, env: envFor(sim.url) }), startCli(['run', file], { cwd: dir.dir, env: envFor(sim.url) })];
      await workers[0]?.whileRunning(gate.reached(2));
      const during = await cli(['status', file, '--json'], { cwd: dir.dir, env: {} });
      expect(during.code, during.stderr).toBe(0);
      const report = JSON.parse(during.stdout) as { status: string; series: { total: number; ended: number }; workers: { alive: boolean; leader: boolean; pid: number }[] };
      expect(report.status).toBe('running');
      expect(report.series.total).toBe(24);
      expect(report.series.ended).toBeLessThan(24);
      expect(report.workers.map((w) => w.alive)).toEqual([true, true]);
      expect(report.workers.filter((w) => w.leader)).toHaveLength(1);
      expect(report.workers.map((w) => w.pid).sort()).toEqual(workers.map((w) => w.child.pid).sort());
      const text = await cli(['status', file], { cwd: dir.dir, env: {} });
      expect(text.stdout).toMatch(/watched: run \S+, running/);
      expect(text.stdout).toMatch(/working \(leader\)/);
      gate.release();
      for (const worker of workers) expect((await worker.done).code).toBe(0);
      const after = JSON.parse((await cli(['status', file, '--json'], { cwd: dir.dir, env: {} })).stdout) as typeof report;
      expect(after.status).toBe('completed');
      expect(after.series.ended).toBe(24);
      expect(after.workers.map((w) => w.alive)).toEqual([false, false]);
    } finally {
      await db.drop();
    }
  });
  it('a worker stopped with SIGTERM hands its series back and leaves; the others complete the run', () =>
    againstOneProcess({}, async ({ single, expected, spec, sim, url }) => {
      expect(single.code).toBe(0);
      const leaving = runChild(spec);
      const staying = runChild(spec);
      await leaving.pagesCommitted(3);
      leaving.child.kill('SIGTERM');
      const left = await leaving.done;
      expect(left.summary?.status).toBe('interrupted');
      const stayed = await staying.done;
      expect(stayed.summary?.status).toBe('completed');
      expect(await stableTable(url, 'results')).toEqual(expected.rows);
      expect(await sql(url, `SELECT status FROM webdata.workers WHERE pid = $1`, [leaving.child.pid])).toEqual([{ status: 'interrupted' }]);
      expect(await sql(url, 'SELECT status FROM webdata.runs')).toEqual([{ status: 'completed' }]);
      // What it answered before it left was committed: nothing was paid twice.
      expect(sim.stats().credits.main?.debited).toBe(expected.debited);
    }));

  it("a combined source: its sources share the run's queue, and each worker pages each series with the source it belongs to", () =>
    againstOneProcess({ split: true }, async ({ single, expected, spec, sim, url }) => {
      expect(single.summary?.status).toBe('completed');
      const results = await Promise.all([runChild(spec).done, runChild(spec).done]);
      for (const result of results) expect(result.summary?.status, result.stderr).toBe('completed');
      expect(await stableTable(url, 'results')).toEqual(expected.rows);
      expect(sim.stats().credits.main?.debited).toBe(expected.debited);
    }));

  it('dedupe across series (global) over three workers: each key is written once, and the keys, sightings and debit are one process\'s', () =>
    againstOneProcess({ dedupeScope: 'global' }, async ({ single, expected, spec, sim, url }) => {
      expect(single.summary?.status).toBe('completed');
      const results = await Promise.all([runChild(spec).done, runChild(spec).done, runChild(spec).done]);
      for (const result of results) {
        expect(result.stderr).not.toContain('ERROR');
        expect(result.summary?.status).toBe('completed');
        expect(result.summary?.worker).toBeDefined();
      }
      const keys = async (at: string) => (await sql(at, 'SELECT dedupe_key FROM results WHERE dedupe_key IS NOT NULL ORDER BY dedupe_key')).map((row) => row.dedupe_key as string);
      const written = await keys(url);
      // Once each: the same keys as one process wrote (which page of which series holds a key may differ).
      expect(new Set(written).size).toBe(written.length);
      const alone = expected.rows.map((row) => (JSON.parse(row) as unknown[]).at(-1)).filter((key) => key !== null);
      expect(written).toEqual([...alone].sort());
      // Each key's first sighting once; every other sighting is a duplicate the series counted.
      const [sightings] = await sql(url, 'SELECT count(*)::int AS n, count(*) FILTER (WHERE first)::int AS first FROM webdata.sightings');
      const [counts] = await sql(url, 'SELECT sum(items_written)::int AS written, sum(duplicates)::int AS duplicates FROM webdata.series');
      const [rows] = await sql(url, 'SELECT count(*)::int AS n FROM results');
      expect(sightings?.first).toBe(written.length);
      expect((sightings?.n as number) - written.length).toBe(counts?.duplicates);
      expect(counts?.written).toBe(rows?.n);
      expect(rows?.n).toBe(expected.rows.length);
      expect(sim.stats().credits.main?.debited).toBe(expected.debited);
    }));

  for (const [what, extra] of [
    ['is not by URL', { dedupeKey: ['title'] }],
    ['shares the page with a persistent dedupe', { persistentToo: true }],
  ] as const) {
    it(`a pipeline whose dedupe across series ${what} stays one process: a second one is told it is running, and how to share a run`, async () => {
      await using sim = await simulator(SIM);
      using dir = workdir();
      const db = await testDatabase();
      try {
        const spec = { ...PLAN, dedupeScope: 'global', ...extra, baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url };
        const gate = sim.park();
        const first = runChild(spec);
        await first.whileRunning(gate.reached(1));
        const second = await runChild(spec).done;
        expect(second.stderr).toMatch(/LeaseHeldError: .*already running.*docs\/distributed\.md/);
        gate.release();
        const done = await first.done;
        expect(done.summary?.status).toBe('completed');
        expect(done.summary?.worker).toBeUndefined();
      } finally {
        await db.drop();
      }
    });
  }
  it('--fresh while workers are at work is refused before anything changes: they must be stopped first', () =>
    onDatabase({}, async ({ sim, db, spec }) => {
      const gate = sim.park();
      const working = runChild(spec);
      await working.whileRunning(gate.reached(1));
      const fresh = await runChild({ ...spec, fresh: true }).done;
      expect(fresh.stderr).toMatch(/RunLifecycleError: .*has workers at work: stop them/);
      gate.release();
      expect((await working.done).summary?.status).toBe('completed');
      expect(await sql(db.url, `SELECT status FROM webdata.runs`)).toEqual([{ status: 'completed' }]);
    }));
  it("a pipeline's next run drops the job queues of its earlier runs (and leaves other pipelines' alone)", () =>
    onDatabase({ queries: QUERIES.slice(0, 2) }, async ({ db, spec }) => {
      const queues = async () => (await sql(db.url, 'SELECT name FROM webdata_jobs.queue ORDER BY name')).map((row) => row.name as string);
      const first = (await runChild(spec).done).summary?.runId;
      const other = (await runChild({ ...spec, name: 'crash-test.other' }).done).summary?.runId;
      expect(await queues()).toEqual([`webdata/crash-test.other/${other}/1`, `webdata/crash-test/${first}/1`]);
      const second = (await runChild(spec).done).summary?.runId;
      expect(second).not.toBe(first);
      expect(await queues()).toEqual([`webdata/crash-test.other/${other}/1`, `webdata/crash-test/${second}/1`]);
    }));

  it("a worker whose pipeline differs from the run's in what decides money or rows is refused before it sends anything (exit 2, naming the difference); the run goes on", async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const db = await testDatabase();
    try {
      const base = { name: 'terms', sinks: [{ type: 'postgres', table: 'results', url: db.url }], state: { url: db.url }, rate: { concurrency: 2 }, budget: { maxCredits: 100 } };
      const file = (change: Record<string, unknown> = {}) => config(dir.dir, { ...base, ...change }, { queries: QUERIES.slice(0, 4), maxPages: 3 });
      // Every request is held: the run stays at work, and whatever a refused worker sent would be held here too.
      const gate = sim.park();
      const working = startCli(['run', file()], { cwd: dir.dir, env: envFor(sim.url) });
      await working.whileRunning(gate.reached(2));
      const variants: [string[], RegExp][] = [
        [['run', file({ credits: { weights: { [SEARCH_PATH]: 0 } } })], /credit weights: \{\} → \{"\/searchengine\/search":0\}/],
        [['run', file({ sinks: [{ type: 'postgres', table: 'other', url: db.url }] })], /sinks: added .*"table":"other".*removed .*"table":"results"/],
        [['run', file({ dedupe: { key: 'url', scope: 'query' } })], /stages: .*"scope":"query"/],
        [['run', file({ rate: { concurrency: 2, requestsPerSecond: 50 } })], /rate: "unpaced" → "50 requests\/s"/],
        [['run', file({ budget: { maxCredits: 40 } })], /budget: 100 → 40/],
        [['run', file(), '--budget', '40'], /budget: the run's is 100 credits, this worker was given 40/],
      ];
      for (const [args, named] of variants) {
        const outcome = await refusedOrJoined(args, dir.dir, sim.url);
        expect(outcome, `${args.join(' ')} joined the run`).not.toBe('joined');
        if (outcome === 'joined') continue;
        expect(outcome.code, outcome.stderr).toBe(2);
        expect(outcome.stderr).toMatch(named);
        expect(outcome.stderr).toContain('cannot join run');
      }
      // None of them sent anything, nor created a table.
      expect(gate.arrived).toBe(2);
      expect(await sql(db.url, `SELECT to_regclass('public.other')::text AS t`)).toEqual([{ t: null }]);
      // Each worker's own concurrency is its own: a worker that differs only there joins.
      const other = startCli(['run', file({ rate: { concurrency: 3 } })], { cwd: dir.dir, env: envFor(sim.url) });
      await other.printed('joined run');
      gate.release();
      for (const worker of [working, other]) {
        const done = await worker.done;
        expect(done.code, done.stderr).toBe(0);
        expect((JSON.parse(done.stdout) as { status: string }).status).toBe('completed');
      }
      const [pages] = await sql(db.url, 'SELECT sum(pages)::int AS n FROM webdata.series');
      expect(sim.stats().credits.main?.debited).toBe(pages?.n);
    } finally {
      await db.drop();
    }
  });

  it("the latest run is the one recorded last, whatever clock wrote its start: a worker beside a run at work joins it, though an older run's started_at is an hour later", async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const db = await testDatabase();
    const children: ReturnType<typeof runChild>[] = [];
    try {
      const spec = { ...PLAN, queries: QUERIES.slice(0, 3), baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url };
      const first = await runChild(spec).done;
      expect(first.summary?.status).toBe('completed');
      // The finished run's start as a machine whose clock is an hour ahead of the next workers' wrote it (or: they
      // are an hour behind it).
      await sql(db.url, `UPDATE webdata.runs SET started_at = started_at + interval '1 hour'`);
      const gate = sim.park();
      const planner = runChild(spec);
      children.push(planner);
      await planner.whileRunning(gate.reached(1));
      const joiner = runChild(spec);
      children.push(joiner);
      await joiner.printed('"type":"start"');
      // It joined the run at work: it did not plan another over it (which deleted the first's queue, and both paid).
      expect(joiner.stderr()).toContain('"joined":true');
      gate.release();
      const results = await Promise.all([planner.done, joiner.done]);
      for (const result of results) expect(result.summary?.status, result.stderr).toBe('completed');
      expect(results[1]?.summary?.runId).toBe(results[0]?.summary?.runId);
      expect(await sql(db.url, 'SELECT count(*)::int AS n FROM webdata.runs')).toEqual([{ n: 2 }]);
      // Each run's pages paid once: twice one run's.
      expect(sim.stats().credits.main?.debited).toBe(2 * (first.summary?.pages.fetched ?? 0));
    } finally {
      for (const child of children) child.child.kill('SIGKILL');
      await db.drop();
    }
  });

  it('a new run never deletes the queue of a run whose worker may still be at work (as when another worker recorded its end on the budget)', async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const db = await testDatabase();
    const children: ReturnType<typeof runChild>[] = [];
    try {
      const spec = { ...PLAN, queries: QUERIES.slice(0, 2), baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url };
      const gate = sim.park();
      const working = runChild(spec);
      children.push(working);
      await working.whileRunning(gate.reached(1));
      const queues = async () => (await sql(db.url, 'SELECT name FROM webdata_jobs.queue ORDER BY name')).map((row) => row.name as string);
      const [queue] = await queues();
      // The run recorded as ended by another worker (its budget reached) while this one still has answers in flight.
      await sql(db.url, `UPDATE webdata.runs SET status = 'budget'`);
      const next = runChild(spec);
      children.push(next);
      await next.printed('"type":"start"');
      expect(next.stderr()).toContain('"joined":false');
      expect(await queues()).toContain(queue);
      gate.release();
      for (const result of await Promise.all([working.done, next.done])) expect(result.code, result.stderr).toBe(0);
    } finally {
      for (const child of children) child.child.kill('SIGKILL');
      await db.drop();
    }
  });

  it("a job in the run's queue that is not the run's (a series not in its plan, or not that series' job) is set aside once, not retried at once without end; the worker ends", async () => {
    await using sim = await simulator(SIM);
    using dir = workdir();
    const db = await testDatabase();
    const spec = { ...PLAN, queries: QUERIES.slice(0, 2), baseUrl: sim.url, dir: dir.dir, postgresUrl: db.url, stateUrl: db.url };
    const gate = sim.park();
    const worker = runChild(spec);
    let watching = true;
    try {
      await worker.whileRunning(gate.reached(1));
      const [queue] = await sql(db.url, 'SELECT name FROM webdata_jobs.queue');
      const [series] = await sql(db.url, `SELECT data->>'series' AS id FROM webdata_jobs.job LIMIT 1`);
      // Sent by something else using the queue: pg-boss gives such jobs the queue's policy (retried at once, 10^6 times).
      const boss = new PgBoss({ connectionString: db.url, schema: 'webdata_jobs', supervise: false, schedule: false, migrate: false, createSchema: false });
      boss.on('error', () => undefined);
      await boss.start();
      const name = queue?.name as string;
      const foreign = [await boss.send(name, { series: 'no such series' }), await boss.send(name, { series: series?.id }), await boss.send(name, { other: true }), await boss.send(name, null)];
      await boss.stop({ graceful: false });
      gate.release();
      // It ends; or it is seen retrying the foreign jobs over and over (as it did, 13,705 times in 35 s, never ending).
      const retries = async () => Number((await sql(db.url, 'SELECT max(retry_count) AS n FROM webdata_jobs.job WHERE id = ANY($1::uuid[])', [foreign]))[0]?.n ?? 0);
      const spinning = async () => {
        while (watching) {
          if ((await retries()) > 50) return 'spinning';
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        return 'watched';
      };
      const outcome = await Promise.race([worker.done.then(() => 'ended'), spinning()]);
      expect(outcome).toBe('ended');
      const done = await worker.done;
      expect(done.code, done.stderr).toBe(0);
      expect(done.summary?.status).toBe('completed');
      expect(await sql(db.url, 'SELECT state, retry_count FROM webdata_jobs.job WHERE id = ANY($1::uuid[])', [foreign])).toEqual(foreign.map(() => ({ state: 'cancelled', retry_count: 0 })));
    } finally {
      watching = false;
      worker.child.kill('SIGKILL');
      await db.drop();
    }
  });

  it("status: the workers' pages add up to the run's (a worker killed just after a commit included), and their credits to the run's credits", () =>
    onDatabase({}, async ({ sim, dir, db, spec }) => {
      // The victim holds series with pages to commit before the other starts: it reaches its third commit whatever the timing.
      const gate = sim.park();
      const victim = runChild(spec, { WEBDATA_CRASH_AT: 'after-commit:3' });
      await victim.whileRunning(gate.reached(2));
      const other = runChild(spec);
      gate.release();
      expect((await victim.done).signal).toBe('SIGKILL');
      const done = await other.done;
      expect(done.summary?.status, done.stderr).toBe('completed');
      // The status command on the same pipeline (its name, state and plan).
      const file = config(dir.dir, { name: 'crash-test', sinks: [{ type: 'postgres', table: 'results', url: db.url }], state: { url: db.url } }, { queries: QUERIES, countries: PLAN.countries, maxPages: PLAN.maxPages });
      const status = await cli(['status', file, '--json'], { cwd: dir.dir, env: {} });
      expect(status.code, status.stderr).toBe(0);
      const report = JSON.parse(status.stdout) as { pages: number; credits: { spent: number }; workers: { pid: number; pages: number; credits: number }[] };
      expect(report.workers).toHaveLength(2);
      expect(report.workers.find((w) => w.pid === victim.child.pid)?.pages).toBeGreaterThanOrEqual(3);
      expect(report.workers.reduce((sum, w) => sum + w.pages, 0)).toBe(report.pages);
      expect(report.workers.reduce((sum, w) => sum + w.credits, 0)).toBe(report.credits.spent);
      // The one that ended counted its own pages as the run did.
      expect(report.workers.find((w) => w.pid === other.child.pid)?.pages).toBe(done.summary?.worker?.pages);
    }));
});

/** Runs the CLI as a worker that must be refused: its result, or 'joined' should it join the run instead (it is then stopped). */
async function refusedOrJoined(args: string[], cwd: string, baseUrl: string): Promise<Result | 'joined'> {
  const worker = startCli(args, { cwd, env: envFor(baseUrl) });
  const joined = await worker.printed('joined run').then(
    () => true,
    () => false,
  );
  if (!joined) return worker.done;
  worker.child.kill('SIGKILL');
  await worker.done;
  return 'joined';
}

/** What a test of workers gets: the plan run by one process alone, and a simulator and database for the workers. */
interface AgainstOne {
  single: ChildResult;
  /** What the workers' run must come to: one process's rows, and what the simulator debited it. */
  expected: { rows: string[]; debited: number };
  /** The same plan, for the workers: their simulator and database. */
  spec: Record<string, unknown>;
  sim: Simulator;
  url: string;
  /** The workers' directory (their files). */
  dir: string;
}

/** Runs the plan (with `extra`) in one process alone, then `body` with workers on a simulator and database of their own. */
async function againstOneProcess(extra: Record<string, unknown>, body: (run: AgainstOne) => Promise<void>): Promise<void> {
  await using alone = await simulator(SIM);
  await using sim = await simulator(SIM);
  using aloneDir = workdir();
  using dir = workdir();
  const one = await testDatabase();
  const many = await testDatabase();
  try {
    const single = await runChild({ ...PLAN, ...extra, baseUrl: alone.url, dir: aloneDir.dir, postgresUrl: one.url, stateUrl: one.url }).done;
    const expected = { rows: await stableTable(one.url, 'results'), debited: alone.stats().credits.main?.debited ?? 0 };
    await body({ single, expected, spec: { ...PLAN, ...extra, baseUrl: sim.url, dir: dir.dir, postgresUrl: many.url, stateUrl: many.url }, sim, url: many.url, dir: dir.dir });
  } finally {
    await one.drop();
    await many.drop();
  }
}

/** The rows of every worker's own file of a per-worker sink (`out.<host>-<n>.csv` / `.jsonl`), as comparable text. */
function workerFileRows(dir: string, ext: 'csv' | 'jsonl'): { files: string[]; rows: string[] } {
  const files = readdirSync(dir).filter((name) => new RegExp(`^out\\..+-\\d+\\.${ext}$`).test(name));
  const rows = files.flatMap((name) => (ext === 'csv' ? stableCsv(join(dir, name)) : stableJsonl(join(dir, name)).map((row) => JSON.stringify((JSON.parse(row) as unknown[]).slice(0, -1)))));
  return { files, rows: blanksAsNull(rows) };
}

/** Rows as CSV can tell them: an empty cell and a missing value are one. */
function blanksAsNull(rows: readonly string[]): string[] {
  return rows.map((row) => JSON.stringify((JSON.parse(row) as unknown[]).map((value) => (value === '' ? null : value)))).sort();
}

/** Polls `probe` until it gives a value (the test's own timeout bounds the wait). */
async function until<T>(probe: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
