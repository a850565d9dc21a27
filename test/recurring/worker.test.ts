// `webdata-etl worker` and `webdata-etl schedules` as a user runs them, in real time, against the simulator: one run per
// occurrence whatever the number of workers (SQLite on one machine, a distributed pipeline on PostgreSQL), a worker
// down across occurrences catching up once, and SIGTERM mid-run taken up again at the next start with nothing lost or
// paid twice. The loop's rules in virtual time: test/recurring/worker-loop.test.ts. No test waits a guessed time: each waits
// for what it can observe (a line printed, rows in the state store), within a generous bound.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { cli, config, envFor, startCli } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { workdir } from '../pipeline-helpers.ts';
import { receiver, SECRET } from '../notify/webhook-helpers.ts';
import { missedNotificationSchema } from '../../src/notifications.ts';


/** Resolves once `condition` holds, polling; fails naming `what` after `ms`. */
async function eventually(what: string, condition: () => Promise<boolean> | boolean, ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Rows of a SQLite state store, read beside the worker (none while the file does not exist yet). */
function sqliteRows(path: string, query: string): Record<string, unknown>[] {
  if (!existsSync(path)) return [];
  const db = new Database(path, { readonly: true });
  try {
    const exists = db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'occurrences'`).get() !== undefined;
    return exists || !query.includes('occurrences') ? (db.prepare(query).all() as Record<string, unknown>[]) : [];
  } finally {
    db.close();
  }
}

const stableRows = (path: string) =>
  sqliteRows(path, 'SELECT query, country, lang, page, position, rank, title, url, domain, snippet, dedupe_key FROM results')
    .map((row) => JSON.stringify(Object.values(row)))
    .sort();

describe('webdata-etl schedules and worker: what they are given', () => {
  it('schedules lists the next occurrences in the zone and UTC, and as JSON; a pipeline without one says so', async () => {
    using dir = workdir();
    const berlin = config(dir.dir, { name: 'berlin', schedule: { cron: '0 6 * * *', timezone: 'Europe/Berlin' } });
    const plain = config(dir.dir, { name: 'plain' });
    const text = await cli(['schedules', berlin, plain, '--count', '2'], { cwd: dir.dir });
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^berlin \(.*\): "0 6 \* \* \*" in Europe\/Berlin, missed: once$/);
    expect(lines.slice(1, 3)).toEqual([expect.stringMatching(/^ {2}\d{4}-\d\d-\d\d 06:00:00 \+0[12]:00 {2}\(\d{4}-\d\d-\d\dT0[45]:00:00\.000Z\)$/), expect.any(String)]);
    expect(lines[3]).toMatch(/^plain \(.*\): no schedule: it runs when started$/);
    const json = (await cli(['schedules', berlin, '--json'], { cwd: dir.dir })).stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(json).toEqual([{ pipeline: 'berlin', file: berlin, schedule: { cron: '0 6 * * *', timezone: 'Europe/Berlin', missed: 'once' }, next: expect.any(Array) }]);
    expect(json[0].next).toHaveLength(5);
  });

  it('worker refuses, before anything runs, a pipeline without a schedule, two of one name, a bad schedule, a bad flag (exit 2)', async () => {
    using dir = workdir();
    const cases: [string[], RegExp][] = [
      [[], /worker needs one or more pipeline files/],
      [[config(dir.dir)], /pipeline "cli-test" has no schedule: add schedule:/],
      [[config(dir.dir, { schedule: { cron: '* * * * *' } }), config(dir.dir, { schedule: { cron: '* * * * *' } })], /are both pipeline "cli-test"/],
      [[config(dir.dir, { schedule: { cron: '0 6 * * *', timezone: 'Berlin' } })], /schedule\.timezone: must be an IANA time zone/],
      [[config(dir.dir, { schedule: { cron: 'every day' } })], /schedule\.cron: must be a cron pattern/],
      [[config(dir.dir, { schedule: { cron: '* * * * *' } }), '--log-format', 'xml'], /--log-format must be text or json/],
    ];
    for (const [args, message] of cases) {
      const result = await cli(['worker', ...args], { cwd: dir.dir });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toMatch(message);
    }
    for (const command of ['worker', 'schedules']) {
      const help = await cli([command, '--help'], { cwd: dir.dir });
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`Usage: webdata-etl ${command}`);
    }
  });
});

describe('webdata-etl worker with the state in SQLite (one machine)', () => {
  it('SIGTERM mid-run: exit 0, the run interrupted; the next start takes the same run up again, and it ends with the rows and the spend of an uninterrupted run', async () => {
    await using sim = await simulator({ seed: 7 });
    await using reference = await simulator({ seed: 7 });
    using dir = workdir();
    const search = { queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 3 };
    const uninterrupted = await cli(['run', config(dir.dir, { name: 'reference', sinks: [{ type: 'sqlite', path: 'ref/results.sqlite' }] }, search)], { cwd: dir.dir, env: envFor(reference.url) });
    expect(uninterrupted.code, uninterrupted.stderr).toBe(0);

    // Every second: the first occurrence starts a run, held in flight by the simulator; those after it are skipped.
    const file = config(dir.dir, { name: 'nightly', schedule: { cron: '* * * * * *' }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }] }, search);
    const state = dir.path('out/results.sqlite');
    const gate = sim.park();
    const first = startCli(['worker', file], { cwd: dir.dir, env: envFor(sim.url) });
    await first.whileRunning(gate.reached(2));
    await first.whileRunning(eventually('an occurrence skipped while the run is at work', () => sqliteRows(state, `SELECT 1 FROM occurrences WHERE outcome = 'skipped'`).length > 0));
    first.child.kill('SIGTERM');
    await first.printed('SIGTERM: stopping');
    gate.release();
    const stopped = await first.done;
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stderr).toMatch(/ended interrupted: it is taken up again at the next start/);
    // A run was at work: the signal's line says it can be resumed.
    expect(stopped.stderr).toMatch(/SIGTERM: stopping — .*can be resumed/);
    const [interrupted] = sqliteRows(state, 'SELECT run_id, status FROM runs');
    expect(sqliteRows(state, 'SELECT run_id, status FROM runs')).toEqual([{ run_id: interrupted?.run_id, status: 'interrupted' }]);
    expect(sqliteRows(state, `SELECT run_id FROM occurrences WHERE outcome = 'started'`)).toEqual([{ run_id: interrupted?.run_id }]);

    // The schedule moved to once a year (a schedule is not part of a run's plan): the next start takes the unfinished
    // run up at once, and no new occurrence comes due to start another.
    writeFileSync(file, readFileSync(file, 'utf8').replace('"* * * * * *"', '"0 0 1 1 *"'));
    const second = startCli(['worker', file], { cwd: dir.dir, env: envFor(sim.url) });
    await second.printed(`run ${String(interrupted?.run_id)} ended: completed`);
    second.child.kill('SIGTERM');
    const done = await second.done;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stderr).toContain(`run ${String(interrupted?.run_id)} is unfinished (interrupted): taking it up again`);
    expect(sqliteRows(state, 'SELECT run_id, status, invocations FROM runs')).toEqual([{ run_id: interrupted?.run_id, status: 'completed', invocations: 2 }]);
    // The same occurrence's run: no occurrence was added for it.
    expect(sqliteRows(state, `SELECT count(*) AS n FROM occurrences WHERE run_id IS NOT NULL`)).toEqual([{ n: 1 }]);
    // Nothing lost, nothing paid twice: the rows and the spend of the uninterrupted run.
    expect(stableRows(state)).toEqual(stableRows(dir.path('ref/results.sqlite')));
    expect(sim.stats().credits.main?.debited).toBe(reference.stats().credits.main?.debited);
    // Each summary went to stdout as a line: the interrupted invocation's, then the completed one's.
    expect(JSON.parse(stopped.stdout.trim()).status).toBe('interrupted');
    expect(JSON.parse(done.stdout.trim())).toMatchObject({ runId: interrupted?.run_id, status: 'completed' });

    // runs lists the skipped occurrences among the runs, and names the one that started the run.
    const runs = (await cli(['runs', file, '--json'], { cwd: dir.dir })).stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(runs.filter((line) => line.runId !== null)).toEqual([expect.objectContaining({ runId: interrupted?.run_id, occurrence: expect.objectContaining({ outcome: 'started' }) })]);
    expect(runs.filter((line) => line.runId === null).every((line) => line.status === 'skipped' && /was still at work/.test(line.occurrence.note))).toBe(true);
  }, 180_000);

  it('a webhook receiver that never answers costs no run: every 2 s an occurrence runs while the ends before it are still being told', async () => {
    await using sim = await simulator({ seed: 3 });
    await using hook = await receiver(() => 'hang');
    using dir = workdir();
    // Each delivery waits 5 s for an answer that never comes: longer than the schedule's period.
    const file = config(
      dir.dir,
      { name: 'unheard', schedule: { cron: '*/2 * * * * *' }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }], notify: { webhooks: [{ url: hook.url, timeoutMs: 5_000, retry: { attempts: 1 } }] } },
      { queries: ['a'], countries: ['us'], maxPages: 1 },
    );
    const state = dir.path('out/results.sqlite');
    // The receiver is on loopback: listed, as webhooks to special addresses must be.
    const worker = startCli(['worker', file], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: '127.0.0.1' } });
    const settled = () => sqliteRows(state, `SELECT due_at, outcome, run_id, note FROM occurrences WHERE outcome <> 'claimed' ORDER BY due_at`);
    const started = () => sqliteRows(state, 'SELECT started_at, finished_at FROM runs ORDER BY started_at');
    await worker.whileRunning(eventually('three runs begun, their ends being told to a receiver that never answers', () => hook.received.length > 0 && started().length >= 3));
    worker.child.kill('SIGTERM');
    const done = await worker.done;
    expect(done.code, done.stderr).toBe(0);
    const rows = settled();
    // None was skipped for the lease (a run whose end was being told holding it) ...
    expect(rows.filter((o) => o.outcome === 'skipped' && /already running|is in use by/.test(String(o.note))), JSON.stringify(rows)).toEqual([]);
    // ... nor for a run that had ended; one skipped for a run really at work (a slow machine) is as it should be.
    for (const o of rows.filter((row) => row.outcome === 'skipped')) {
      const runId = /run (\S+) was still at work/.exec(String(o.note))?.[1];
      const [run] = sqliteRows(state, `SELECT finished_at FROM runs WHERE run_id = '${String(runId)}'`);
      expect(run === undefined || run.finished_at === null || String(run.finished_at) > String(o.due_at), JSON.stringify({ o, run })).toBe(true);
    }
    // Runs began while the end of the one before was still being told (each delivery takes 5 s; they come every 2 s).
    const starts = started().map((run) => Date.parse(String(run.started_at)));
    expect(starts.some((at, i) => i > 0 && at - (starts[i - 1] as number) < 5_000), JSON.stringify(started())).toBe(true);
  }, 180_000);

  it("two workers on one machine and a worker down across occurrences: one run per occurrence, and one catch-up run (missed: 'once')", async () => {
    await using sim = await simulator({ seed: 11 });
    using dir = workdir();
    const file = config(dir.dir, { name: 'often', schedule: { cron: '*/2 * * * * *', missed: 'once' }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }] }, { queries: ['a'], countries: ['us'], maxPages: 1 });
    const state = dir.path('out/results.sqlite');
    const started = () => sqliteRows(state, `SELECT due_at, run_id FROM occurrences WHERE outcome IN ('started', 'resumed') ORDER BY due_at`);
    const workers = [startCli(['worker', file], { cwd: dir.dir, env: envFor(sim.url) }), startCli(['worker', file], { cwd: dir.dir, env: envFor(sim.url) })];
    await Promise.all(workers.map((w) => w.whileRunning(eventually('three occurrences started', () => started().length >= 3))));
    for (const worker of workers) worker.child.kill('SIGTERM');
    for (const worker of workers) expect((await worker.done).code).toBe(0);
    // A run the signal caught part way would be taken up by the next start, in place of the catch-up this test is
    // about (never a burst): it is finished by hand first.
    if (sqliteRows(state, `SELECT 1 FROM runs WHERE status = 'interrupted'`).length > 0) expect((await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) })).code).toBe(0);

    // Every occurrence was claimed once, each started one ran once: as many runs as occurrences that started one.
    const runs = sqliteRows(state, 'SELECT run_id, status FROM runs');
    const ran = started();
    expect(new Set(ran.map((o) => o.run_id)).size).toBe(ran.length);
    expect(runs).toHaveLength(ran.length);
    const debitedBefore = sim.stats().credits.main?.debited;
    expect(debitedBefore).toBe(runs.length);

    // Down across two occurrences (or more: the machine may be slow), then up again: the latest runs once, late.
    const [last] = sqliteRows(state, 'SELECT max(due_at) AS at FROM occurrences');
    const downFrom = Date.parse(String(last?.at));
    await eventually('two occurrences to pass with no worker up', () => Date.now() > downFrom + 4_100);
    const again = startCli(['worker', file], { cwd: dir.dir, env: envFor(sim.url) });
    const since = () => sqliteRows(state, `SELECT due_at, outcome, run_id, note FROM occurrences WHERE due_at > '${new Date(downFrom).toISOString()}' ORDER BY due_at`);
    // The first occurrence after the gap to start a run: the catch-up, once its run has ended.
    const catchUp = () => since().find((o) => o.run_id !== null);
    await again.whileRunning(
      eventually('the catch-up run ended', () => {
        const run = catchUp();
        return run !== undefined && sqliteRows(state, `SELECT 1 FROM runs WHERE run_id = '${String(run.run_id)}' AND status = 'completed'`).length === 1;
      }),
    );
    again.child.kill('SIGTERM');
    expect((await again.done).code).toBe(0);
    const rows = since();
    const late = rows.findIndex((o) => o.run_id !== null);
    // Those due while no worker was up: all missed but the latest, which ran once, late.
    expect(late).toBeGreaterThanOrEqual(1);
    expect(rows.slice(0, late).map((o) => o.outcome)).toEqual(rows.slice(0, late).map(() => 'missed'));
    expect(rows[late]).toMatchObject({ outcome: 'started', note: `catch-up: ${late + 1} occurrences were due while no worker was up (missed: once)` });
  }, 180_000);
});

describe('webdata-etl worker tells webhooks of missed occurrences', () => {
  it("a worker down across occurrences: at its next start the webhook is sent one 'missed' notification, signed and delivered as a run's end is, and it is recorded", async () => {
    await using sim = await simulator({ seed: 13 });
    await using hook = await receiver();
    using dir = workdir();
    // `on` as it comes: run ends and missed occurrences.
    const file = config(dir.dir, { name: 'watched', schedule: { cron: '*/2 * * * * *' }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }], notify: { webhooks: [{ url: hook.url }] } }, { queries: ['a'], countries: ['us'], maxPages: 1 });
    const state = dir.path('out/results.sqlite');
    const env = { ...envFor(sim.url), WEBDATA_WEBHOOK_SECRET: SECRET, WEBDATA_ALLOWED_HOSTS: '127.0.0.1' };
    const bodies = () => hook.json();
    const first = startCli(['worker', file], { cwd: dir.dir, env });
    await first.whileRunning(eventually('a run told of its end', () => bodies().some((body) => body.type === 'run.ended')));
    first.child.kill('SIGTERM');
    expect((await first.done).code).toBe(0);
    const [last] = sqliteRows(state, 'SELECT max(due_at) AS at FROM occurrences');
    const downFrom = Date.parse(String(last?.at));
    await eventually('two occurrences to pass with no worker up', () => Date.now() > downFrom + 4_100);

    const second = startCli(['worker', file], { cwd: dir.dir, env });
    await second.whileRunning(eventually('a missed notification', () => bodies().some((body) => body.type === 'occurrence.missed')));
    second.child.kill('SIGTERM');
    expect((await second.done).code).toBe(0);

    const missedRows = sqliteRows(state, `SELECT due_at, worker FROM occurrences WHERE outcome = 'missed' AND due_at > '${new Date(downFrom).toISOString()}' ORDER BY due_at`);
    const [catchUp] = sqliteRows(state, `SELECT due_at FROM occurrences WHERE note LIKE 'catch-up:%' AND due_at > '${new Date(downFrom).toISOString()}'`);
    expect(missedRows.length).toBeGreaterThanOrEqual(1);
    const told = hook.received.filter((r) => JSON.parse(r.body.toString('utf8')).type === 'occurrence.missed');
    expect(told).toHaveLength(1);
    const body = missedNotificationSchema.parse(JSON.parse(String(told[0]?.body)));
    expect(body).toEqual({
      type: 'occurrence.missed',
      idempotencyKey: `missed:watched@${String(missedRows.at(-1)?.due_at)}#1`,
      pipeline: 'watched',
      event: 'missed',
      schedule: { cron: '*/2 * * * * *', timezone: 'UTC', missed: 'once' },
      missed: missedRows.map((row) => row.due_at),
      more: false,
      catchUp: catchUp?.due_at,
      worker: missedRows[0]?.worker,
    });
    // Signed and sent as a run's end is: the same headers, one of them the body's idempotency key (the receiver's to
    // drop repeats by), as a run's end has its own.
    const ended = hook.received.find((r) => JSON.parse(r.body.toString('utf8')).type === 'run.ended');
    const names = (headers: Record<string, unknown>) => Object.keys(headers).filter((name) => !['content-length', 'host', 'connection'].includes(name)).sort();
    expect(names(told[0]?.headers ?? {})).toEqual(names(ended?.headers ?? {}));
    expect(Object.values(told[0]?.headers ?? {})).toContain(body.idempotencyKey);
    expect(Object.values(ended?.headers ?? {})).toContain(JSON.parse(String(ended?.body)).idempotencyKey);
    // Recorded as every notification is.
    expect(sqliteRows(state, `SELECT run_id, event, status, attempts, body FROM notifications WHERE event = 'missed'`)).toEqual([
      { run_id: `missed:watched@${String(missedRows.at(-1)?.due_at)}`, event: 'missed', status: 'delivered', attempts: 1, body: null },
    ]);
    expect(second.output().stderr).toMatch(/webhook http:\/\/127\.0\.0\.1:\d+\/hooks\/webdata: delivered \(missed, 1 attempt\)/);
    // runs shows it on the latest missed occurrence's line.
    const runs = (await cli(['runs', file, '--json'], { cwd: dir.dir })).stdout.trim().split('\n').map((line) => JSON.parse(line));
    const line = runs.find((each) => each.runId === null && each.occurrence.dueAt === missedRows.at(-1)?.due_at);
    expect(line?.notifications).toEqual([{ invocation: 1, webhook: hook.shown, event: 'missed', status: 'delivered', attempts: 1, error: null, at: expect.any(String) }]);
  }, 180_000);
});

describe('webdata-etl worker --simulator', () => {
  it('keeps WEBDATA_ALLOWED_HOSTS (the simulator\'s loopback added): a webhook on a host the list leaves out is refused before anything runs, nothing sent', async () => {
    await using hook = await receiver(undefined, { host: '127.0.0.2' });
    using dir = workdir();
    const file = config(dir.dir, { name: 'listed', schedule: { cron: '* * * * * *' }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }], notify: { webhooks: [{ url: hook.url }] } }, { queries: ['a'], countries: ['us'], maxPages: 1 });
    const result = await cli(['worker', file, '--simulator'], { cwd: dir.dir, env: { WEBDATA_ALLOWED_HOSTS: 'api.example.com', WEBDATA_WEBHOOK_SECRET: SECRET } });
    // Refused as a run refuses it, before any occurrence (no credit spent), naming the webhook's host and the list.
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(/notify\.webhooks\.0\.url: http:\/\/127\.0\.0\.2:\d+ is not among WEBDATA_ALLOWED_HOSTS \(api\.example\.com, 127\.0\.0\.1\)/);
    expect(sqliteRows(dir.path('out/results.sqlite'), 'SELECT * FROM occurrences')).toEqual([]);
    expect(hook.received).toHaveLength(0);
  }, 120_000);

  it('drifts as run --simulator does: the change digests of its runs, a few seconds apart, show rankings moving', async () => {
    await using hook = await receiver();
    using dir = workdir();
    const file = config(
      dir.dir,
      { name: 'drifting', schedule: { cron: '*/2 * * * * *' }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }], notify: { webhooks: [{ url: hook.url, top: 10, minRankMove: 1 }] } },
      { queries: ['espresso', 'kettle'], countries: ['us', 'gb'], maxPages: 2 },
    );
    // The receiver's host listed: the list is kept, and the simulator's loopback is on it.
    const worker = startCli(['worker', file, '--simulator'], { cwd: dir.dir, env: { WEBDATA_ALLOWED_HOSTS: '127.0.0.1', WEBDATA_WEBHOOK_SECRET: SECRET } });
    // Runs begun more than the simulator's drift period (5 s) apart: rankings drifted between two of them.
    const started = () => hook.json().map((body) => Date.parse(String((body.summary as { startedAt: string }).startedAt)));
    await worker.whileRunning(eventually('runs more than 6 s apart, each told of', () => started().length >= 2 && Math.max(...started()) - Math.min(...started()) > 6_000));
    worker.child.kill('SIGTERM');
    expect((await worker.done).code).toBe(0);
    const counts = hook.json().map((body) => (body.digest as { counts: { entered: number; left: number; moved: number } }).counts);
    expect(counts.some((c) => c.entered + c.left + c.moved > 0), JSON.stringify(counts)).toBe(true);
  }, 120_000);

  it('SIGTERM with no run at work says so, and no "the run can be resumed"', async () => {
    using dir = workdir();
    const file = config(dir.dir, { name: 'yearly', schedule: { cron: '0 0 1 1 *' }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }] });
    const worker = startCli(['worker', file, '--simulator'], { cwd: dir.dir });
    await worker.printed('scheduled "0 0 1 1 *"');
    worker.child.kill('SIGTERM');
    const done = await worker.done;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stderr).toContain('SIGTERM: stopping — no run is at work');
    expect(done.stderr).not.toContain('can be resumed');
  }, 60_000);
});

describePostgres('webdata-etl worker with the state in PostgreSQL', () => {
  it('two workers on one distributed pipeline, a cron of seconds: one run per occurrence, each paid as one run is', async () => {
    // Answers slow enough, one request at a time, for a run to outlast a worker's way into it.
    await using sim = await simulator({ seed: 5, latencyMs: { min: 250, max: 350 } });
    await using reference = await simulator({ seed: 5 });
    using dir = workdir();
    const db = await testDatabase();
    const alone = await testDatabase();
    try {
      const search = { queries: ['espresso', 'kettle'], countries: ['us', 'gb'], maxPages: 2 };
      const on = (url: string, extra: Record<string, unknown> = {}) =>
        config(dir.dir, { name: 'fleet', sinks: [{ type: 'postgres', url, table: 'results' }], state: { url }, rate: { concurrency: 1 }, ...extra }, search);
      const once = await cli(['run', on(alone.url)], { cwd: dir.dir, env: envFor(reference.url) });
      expect(once.code, once.stderr).toBe(0);
      const perRun = reference.stats().credits.main?.debited ?? 0;
      expect(perRun).toBeGreaterThan(0);

      const file = on(db.url, { schedule: { cron: '*/3 * * * * *' } });
      // The schema is the workers' to make: until they have, nothing has started.
      const started = async () => sql(db.url, `SELECT due_at, run_id FROM webdata.occurrences WHERE outcome IN ('started', 'resumed') AND run_id IS NOT NULL ORDER BY due_at`).catch(() => []);
      const completed = async () => ((await sql(db.url, `SELECT count(*)::int AS n FROM webdata.runs WHERE status = 'completed'`).catch(() => []))[0]?.n as number | undefined) ?? 0;
      const workers = [startCli(['worker', file], { cwd: dir.dir, env: envFor(sim.url) }), startCli(['worker', file], { cwd: dir.dir, env: envFor(sim.url) })];
      // The claimant's run is joined by the other worker (its row among the run's workers), at least once.
      const joined = async () => (await sql(db.url, 'SELECT run_id FROM webdata.workers GROUP BY run_id HAVING count(DISTINCT pid) = 2').catch(() => [])).length > 0;
      await Promise.all(
        workers.map((w) =>
          w.whileRunning(eventually('three runs of occurrences completed, one of them worked by both workers', async () => (await started()).length >= 3 && (await completed()) >= 3 && (await joined()), 150_000)),
        ),
      );
      for (const worker of workers) worker.child.kill('SIGTERM');
      const results = await Promise.all(workers.map((w) => w.done));
      for (const result of results) expect(result.code, result.stderr).toBe(0);

      const occurrences = await sql(db.url, 'SELECT due_at, outcome, run_id FROM webdata.occurrences ORDER BY due_at');
      const runs = await sql(db.url, 'SELECT run_id, status FROM webdata.runs');
      const ran = occurrences.filter((o) => o.run_id !== null);
      // One run per occurrence that started one, never two; every run is an occurrence's.
      expect(new Set(ran.map((o) => o.run_id)).size).toBe(ran.length);
      expect(runs.map((r) => r.run_id).sort()).toEqual(ran.map((o) => o.run_id).sort());
      // Each occurrence was claimed once (the key is its due time): every row a distinct due time, at three-second steps.
      for (const o of occurrences) expect(new Date(o.due_at as Date).getUTCSeconds() % 3).toBe(0);
      // Paid as many times as there were runs, each as one run alone (a run the stop interrupted pays less).
      const finished = runs.filter((r) => r.status === 'completed').length;
      const debited = sim.stats().credits.main?.debited ?? 0;
      expect(debited).toBeGreaterThanOrEqual(finished * perRun);
      expect(debited).toBeLessThanOrEqual(runs.length * perRun);
      const spent = await sql(db.url, 'SELECT COALESCE(SUM(credits), 0)::int AS n FROM webdata.spend');
      expect(spent).toEqual([{ n: debited }]);
      // status shows the schedule and its latest occurrences.
      const status = JSON.parse((await cli(['status', file, '--json'], { cwd: dir.dir })).stdout);
      expect(status.schedule).toMatchObject({ cron: '*/3 * * * * *', timezone: 'UTC', missed: 'once', next: expect.any(String) });
      expect(status.schedule.occurrences.length).toBeGreaterThanOrEqual(3);
      const text = (await cli(['status', file], { cwd: dir.dir })).stdout;
      expect(text).toMatch(/^schedule: "\*\/3 \* \* \* \* \*" in UTC \(missed: once\); next due \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+00:00$/m);
      expect(text).toMatch(/^occurrences, latest first:\n {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+00:00 {2}(started|skipped|resumed) /m);
    } finally {
      await db.drop();
      await alone.drop();
    }
  }, 240_000);
});
