// Workers whose clocks disagree (docs/schedules.md#clocks), in real time over a real PostgreSQL: one worker's clock an
// hour ahead must not stall the fleet's schedule. The loops are driven here (src/recurring/worker-loop.ts), each with
// its clock injected and a stand-in for its runs; the command line's worker: test/recurring/worker.test.ts.
import pg from 'pg';
import { expect, it } from 'vitest';
import type { ClaimStore, Launch, ScheduleNews } from '../../src/recurring/worker-loop.ts';
import { WorkerLoop } from '../../src/recurring/worker-loop.ts';
import { scheduleSchema } from '../../src/recurring/schedule-config.ts';
import { type Clock, systemClock } from '../../src/schedule/clock.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { cli, config } from '../cli-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { workdir } from '../pipeline-helpers.ts';

const HOUR = 3_600_000;

/** Resolves once `condition` holds, polling; fails naming `what` after `ms`. */
async function eventually(what: string, condition: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** This machine's clock, `offsetMs` off in wall-clock time (the time a worker reads; its timers are the machine's). */
const offsetClock = (offsetMs: number): Clock => ({ ...systemClock, epoch: () => Date.now() + offsetMs });

/** A worker's loop over pipeline "fleet", every second, its runs stand-ins that end at once; `stop()` ends it. */
function startWorker(name: string, store: ClaimStore, clock: Clock) {
  const stop = new AbortController();
  const news: ScheduleNews[] = [];
  const runs: string[] = [];
  const claims: string[] = [];
  const launch: Launch = async (_take, hooks) => {
    const runId = `${name}-${runs.length + 1}`;
    runs.push(runId);
    hooks.onStart({ runId, resumed: false });
    return { kind: 'ran', runId, status: 'completed' };
  };
  // The store's methods, bound (a PostgreSQL store is a class's instance), its claims counted.
  const counted: ClaimStore = {
    claimOccurrence: async (claim) => {
      claims.push(claim.dueAt);
      return store.claimOccurrence(claim);
    },
    storeClock: () => store.storeClock(),
    settleOccurrence: (...args) => store.settleOccurrence(...args),
    occurrences: (...args) => store.occurrences(...args),
    pruneOccurrences: (...args) => store.pruneOccurrences(...args),
    latestRun: (...args) => store.latestRun(...args),
  };
  const loop = new WorkerLoop({
    pipeline: { name: 'fleet', schedule: scheduleSchema.parse({ cron: '* * * * * *' }), shared: false },
    store: counted,
    launch,
    worker: name,
    stop: stop.signal,
    clock,
    say: (item) => news.push(item),
  });
  const running = loop.run();
  return {
    news,
    runs,
    claims,
    stop: async () => {
      stop.abort();
      await running;
    },
  };
}

describePostgres('a fleet on PostgreSQL with one clock an hour ahead', () => {
  it('the worker with the right clock runs its occurrences; no claim is ahead of the database\'s now(); runs and status name a claim that is', async () => {
    const db = await testDatabase();
    const pools = [new pg.Pool({ connectionString: db.url, max: 2 }), new pg.Pool({ connectionString: db.url, max: 2 })];
    using dir = workdir();
    try {
      const [fastStore, rightStore] = await Promise.all(pools.map((pool) => postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'fleet' })));
      // The fast worker alone first, until it has claimed (or tried to claim) an occurrence or two.
      const fast = startWorker('fast', fastStore as ClaimStore, offsetClock(HOUR));
      await eventually('the fast worker to try a claim', () => fast.claims.length >= 2);
      await fast.stop();
      // What a worker of an earlier version, its clock ahead, could leave: a claim due in an hour.
      await sql(db.url, `INSERT INTO webdata.occurrences (pipeline, due_at, outcome, worker) VALUES ('fleet', now() + interval '1 hour', 'started', 'old-fast')`);

      const right = startWorker('right', rightStore as ClaimStore, systemClock);
      try {
        await eventually('the worker with the right clock to run three occurrences', () => right.runs.length >= 3);
      } finally {
        await right.stop();
      }
      // The fast worker heard from the database that its clock is ahead, said so, and kept the database's time.
      expect(fast.news).toContainEqual(expect.objectContaining({ message: expect.stringMatching(/^this worker's clock is 3\d{3}\.\d s ahead of its state store's/) }));
      // Nothing it claimed lies ahead of the database's clock (but the old worker's row).
      const ahead = await sql(db.url, `SELECT worker FROM webdata.occurrences WHERE due_at > now() + interval '2 seconds'`);
      expect(ahead).toEqual([{ worker: 'old-fast' }]);
      const started = await sql(db.url, `SELECT worker, run_id FROM webdata.occurrences WHERE worker = 'right' AND outcome = 'started'`);
      expect(started.length).toBeGreaterThanOrEqual(3);

      // runs and status show the old worker's claim as an anomaly, naming it.
      const runs = (await cli(['runs', '--database-url', db.url, '--json'], { cwd: dir.dir })).stdout.trim().split('\n').map((line) => JSON.parse(line));
      const odd = runs.filter((line) => line.occurrence?.anomaly !== undefined);
      expect(odd).toEqual([expect.objectContaining({ occurrence: expect.objectContaining({ worker: 'old-fast', anomaly: expect.stringMatching(/claimed 3\d{3} s before it was due, by worker old-fast/) }) })]);
      const table = (await cli(['runs', '--database-url', db.url], { cwd: dir.dir })).stdout;
      expect(table).toMatch(/anomaly: claimed 3\d{3} s before it was due, by worker old-fast/);
      const file = config(dir.dir, { name: 'fleet', schedule: { cron: '* * * * * *' }, state: { url: db.url }, sinks: [{ type: 'postgres', url: db.url, table: 'results' }] });
      const status = await cli(['status', file, '--json'], { cwd: dir.dir });
      expect(status.code, status.stderr).toBe(0);
      const latest = JSON.parse(status.stdout).schedule.occurrences[0];
      expect(latest).toMatchObject({ worker: 'old-fast', anomaly: expect.stringMatching(/by worker old-fast/) });
      expect((await cli(['status', file], { cwd: dir.dir })).stdout).toMatch(/started +anomaly: claimed 3\d{3} s before it was due, by worker old-fast/);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
      await db.drop();
    }
  }, 120_000);
});
