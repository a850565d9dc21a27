// A worker's loop over a scheduled pipeline (src/recurring/worker-loop.ts) on a clock the tests control: claims, runs,
// overlap, missed occurrences and catch-up, restarts, several workers on one store. The runs are stand-ins that take
// virtual time and record themselves in a real SQLite state store; the command line's real runs: test/recurring/worker.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { inZone, occurrencesOf } from '../../src/recurring/occurrences.ts';
import type { RunTake } from '../../src/recurring/run-take.ts';
import { scheduleSchema } from '../../src/recurring/schedule-config.ts';
import { type ClaimStore, type Launch, type LaunchOutcome, type MissedFound, MOST_DUE_AT_ONCE, type ScheduleNews, WorkerLoop } from '../../src/recurring/worker-loop.ts';
import { type Clock, virtualClock, type VirtualClock } from '../../src/schedule/clock.ts';
import { UNFINISHED } from '../../src/state/interfaces.ts';
import { type SqliteStateStore, sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { definePipeline, normalize, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { RunAtWorkError, RunEndedError } from '../../src/errors/index.ts';
import { rejection, simulator } from '../helpers.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** Midnight UTC, 2026-03-02: the tests' epoch. */
const T0 = Date.UTC(2026, 2, 2);

describe('a schedule\'s occurrences', () => {
  it('are read in the time zone, across daylight saving time, and listed in order', () => {
    const berlin = occurrencesOf({ cron: '0 6 * * *', timezone: 'Europe/Berlin' });
    // 06:00 in Berlin is 05:00 UTC in winter, 04:00 in summer (from 29 March 2026).
    expect(berlin.upcoming(3, Date.UTC(2026, 2, 28, 12)).map((at) => new Date(at).toISOString())).toEqual([
      '2026-03-29T04:00:00.000Z',
      '2026-03-30T04:00:00.000Z',
      '2026-03-31T04:00:00.000Z',
    ]);
    expect(inZone(Date.UTC(2026, 2, 29, 4), 'Europe/Berlin')).toBe('2026-03-29 06:00:00 +02:00');
    expect(inZone(Date.UTC(2026, 2, 28, 5), 'Europe/Berlin')).toBe('2026-03-28 06:00:00 +01:00');
    expect(inZone(Date.UTC(2026, 2, 28, 5), 'UTC')).toBe('2026-03-28 05:00:00 +00:00');
    // 02:30 does not exist on 29 March in Berlin: a fixed time runs at the first valid one after the gap, once.
    const gap = occurrencesOf({ cron: '30 2 * * *', timezone: 'Europe/Berlin' });
    expect(gap.upcoming(3, Date.UTC(2026, 2, 28)).map((at) => inZone(at, 'Europe/Berlin'))).toEqual([
      '2026-03-28 02:30:00 +01:00',
      '2026-03-29 03:00:00 +02:00',
      '2026-03-30 02:30:00 +02:00',
    ]);
  });

  it('due between two times: oldest first, the end included, at most a limit (the latest), saying there were more', () => {
    const everyMinute = occurrencesOf({ cron: '* * * * *', timezone: 'UTC' });
    expect(everyMinute.dueBetween(T0, T0 + 3 * MINUTE, 10)).toEqual({ due: [T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE], more: false });
    expect(everyMinute.dueBetween(T0, T0 + 3 * MINUTE - 1, 10).due).toEqual([T0 + MINUTE, T0 + 2 * MINUTE]);
    expect(everyMinute.dueBetween(T0, T0 + 10 * MINUTE, 3)).toEqual({ due: [T0 + 8 * MINUTE, T0 + 9 * MINUTE, T0 + 10 * MINUTE], more: true });
    // Seconds: a six-field pattern.
    expect(occurrencesOf({ cron: '*/2 * * * * *', timezone: 'UTC' }).upcoming(2, T0 + 500)).toEqual([T0 + 2000, T0 + 4000]);
  });
});

/** One worker's stand-in runs: each takes `takes` of virtual time and records itself as a run does. */
interface Fleet {
  clock: VirtualClock;
  store: SqliteStateStore;
  /** Every launch of every worker, in order. */
  launches: { worker: string; take: RunTake; at: number }[];
  news: ScheduleNews[];
  /** Starts a worker's loop; `stop()` stops it, and resolves once its runs are over. */
  worker(name: string, options?: { schedule?: Record<string, unknown>; shared?: boolean; launch?: Launch; store?: ClaimStore; clock?: Clock }): { stop(): Promise<void> };
  /** What every worker's loop told of missed occurrences (for the webhooks), in order. */
  toldMissed: MissedFound[];
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function fleet(options: { takes?: number; start?: number } = {}): Fleet {
  const dir = mkdtempSync(join(tmpdir(), 'webdata-loop-'));
  dirs.push(dir);
  // A second past midnight: a worker up at the very instant of an occurrence takes it, which is not what these tests are about.
  const clock = virtualClock(0, options.start ?? T0 + 1000);
  // The store keeps the same virtual time: the workers' clocks agree with it (but one a test puts off).
  const store = sqliteStateStore(new Database(join(dir, 'state.sqlite')), { clock: () => clock.epoch?.() ?? 0 });
  const launches: Fleet['launches'] = [];
  const news: ScheduleNews[] = [];
  const toldMissed: MissedFound[] = [];
  let runs = 0;
  /** A run as `run()` takes it: a new one or the unfinished one (start), or the one named (continue); lease-free. */
  const standIn =
    (worker: string, stop: AbortSignal): Launch =>
    async (take, hooks) => {
      launches.push({ worker, take, at: clock.epoch?.() ?? 0 });
      const latest = await store.latestRun('p');
      const unfinished = latest && UNFINISHED.has(latest.status) ? latest : undefined;
      if (take.kind === 'continue' && unfinished?.runId !== take.runId) return { kind: 'ended', message: `run ${take.runId} ended` };
      const runId = take.kind === 'continue' ? take.runId : (unfinished?.runId ?? `run-${++runs}`);
      if (unfinished) await store.reopenRun(runId, null);
      else await store.startRun({ runId, pipeline: 'p', startedAt: new Date(clock.epoch?.() ?? 0).toISOString(), fingerprint: 'f', plan: {}, budget: null });
      hooks.onStart({ runId, resumed: unfinished !== undefined });
      const status = await clock.sleep(options.takes ?? 10 * MINUTE, stop).then(
        () => 'completed',
        () => 'interrupted',
      );
      await store.finishRun(runId, status, new Date(clock.epoch?.() ?? 0).toISOString(), {});
      return { kind: 'ran', runId, status } satisfies LaunchOutcome;
    };
  return {
    clock,
    store,
    launches,
    news,
    toldMissed,
    worker(name, { schedule = { cron: '0 * * * *' }, shared = false, launch, store: claims = store, clock: own = clock } = {}) {
      const stop = new AbortController();
      const loop = new WorkerLoop({
        pipeline: { name: 'p', schedule: scheduleSchema.parse(schedule), shared },
        store: claims,
        launch: launch ?? standIn(name, stop.signal),
        worker: name,
        stop: stop.signal,
        clock: own,
        say: (item) => news.push(item),
        tellMissed: async (found) => void toldMissed.push(found),
      });
      const running = loop.run();
      return {
        stop: async () => {
          stop.abort();
          await running;
        },
      };
    },
  };
}

/** Virtual time passes until `at` (the loops' timers due before it fire first, in order). */
const until = (f: Fleet, at: number) => f.clock.sleep(at - (f.clock.epoch?.() ?? 0));

const occurrences = async (f: Fleet) =>
  (await f.store.occurrences('p')).reverse().map((o) => ({ due: (Date.parse(o.dueAt) - T0) / MINUTE, outcome: o.outcome, runId: o.runId }));

describe('a worker\'s loop over a scheduled pipeline (virtual time)', () => {
  it('runs each occurrence once, as it comes due, each a run of its own', async () => {
    const f = fleet();
    const worker = f.worker('w1');
    await until(f, T0 + 3 * HOUR + 30 * MINUTE);
    await worker.stop();
    expect(await occurrences(f)).toEqual([
      { due: 60, outcome: 'started', runId: 'run-1' },
      { due: 120, outcome: 'started', runId: 'run-2' },
      { due: 180, outcome: 'started', runId: 'run-3' },
    ]);
    expect(f.launches.map((l) => [(l.at - T0) / MINUTE, l.take.kind])).toEqual([
      [60, 'start'],
      [120, 'start'],
      [180, 'start'],
    ]);
  });

  it('an occurrence due while the previous run is at work is skipped, and said', async () => {
    const f = fleet({ takes: 25 * MINUTE });
    const worker = f.worker('w1', { schedule: { cron: '*/10 * * * *' } });
    await until(f, T0 + 45 * MINUTE);
    await worker.stop();
    expect(await occurrences(f)).toEqual([
      { due: 10, outcome: 'started', runId: 'run-1' },
      { due: 20, outcome: 'skipped', runId: null },
      { due: 30, outcome: 'skipped', runId: null },
      { due: 40, outcome: 'started', runId: 'run-2' },
    ]);
    expect(f.news).toContainEqual(expect.objectContaining({ outcome: 'skipped', message: 'run run-1 was still at work' }));
  });

  it('an occurrence due while this worker winds down a run that has ended (a slow join, webhooks) is run: only a run really at work skips one', async () => {
    const f = fleet();
    const at = (minutes: number) => new Date(T0 + minutes * MINUTE).toISOString();
    // The run of the occurrence due at midnight was left unfinished: the worker takes it up as it starts.
    await f.store.startRun({ runId: 'run-0', pipeline: 'p', startedAt: at(0), fingerprint: 'f', plan: {}, budget: null });
    await f.store.claimOccurrence({ pipeline: 'p', dueAt: at(0), outcome: 'claimed', worker: 'w0' });
    await f.store.settleOccurrence('p', at(0), { outcome: 'started', runId: 'run-0' });
    const worker = f.worker('w1', {
      schedule: { cron: '*/10 * * * *' },
      launch: async (take, hooks) => {
        f.launches.push({ worker: 'w1', take, at: f.clock.epoch?.() ?? 0 });
        const runId = take.kind === 'continue' ? take.runId : 'run-1';
        if (take.kind === 'start') await f.store.startRun({ runId, pipeline: 'p', startedAt: at(10), fingerprint: 'f', plan: {}, budget: null });
        hooks.onStart({ runId, resumed: take.kind === 'continue' });
        // The run ends at once; its launch lingers a quarter of an hour after (a slow join of the ended run, a receiver slow to answer).
        await f.store.finishRun(runId, 'completed', new Date(f.clock.epoch?.() ?? 0).toISOString(), {});
        if (take.kind === 'continue') await f.clock.sleep(15 * MINUTE);
        return { kind: 'ran', runId, status: 'completed' };
      },
    });
    await until(f, T0 + 12 * MINUTE);
    await worker.stop();
    expect(await occurrences(f)).toEqual([
      { due: 0, outcome: 'started', runId: 'run-0' },
      { due: 10, outcome: 'started', runId: 'run-1' },
    ]);
    expect(f.launches.map((l) => [(l.at - T0) / MINUTE, l.take.kind])).toEqual([
      [1 / 60, 'continue'],
      [10, 'start'],
    ]);
  });

  it('a worker whose clock is an hour ahead keeps the store\'s time: each occurrence runs once, on time, none claimed ahead; it says its clock is off', async () => {
    const f = fleet();
    const fast: Clock = { ...f.clock, epoch: () => (f.clock.epoch?.() ?? 0) + HOUR };
    // The fast worker first: its clock would have it claim the occurrences of the next hour at once.
    const workers = [f.worker('fast', { clock: fast }), f.worker('right')];
    await until(f, T0 + 3 * HOUR + 30 * MINUTE);
    await Promise.all(workers.map((w) => w.stop()));
    expect((await occurrences(f)).map((o) => [o.due, o.outcome])).toEqual([
      [60, 'started'],
      [120, 'started'],
      [180, 'started'],
    ]);
    // Each run launched when its occurrence was due (by the store's clock), whichever worker claimed it.
    expect(f.launches.map((l) => (l.at - T0) / MINUTE)).toEqual([60, 120, 180]);
    for (const row of await f.store.occurrences('p')) expect(Date.parse(row.claimedAt)).toBeGreaterThanOrEqual(Date.parse(row.dueAt));
    expect(f.news).toContainEqual({ pipeline: 'p', message: expect.stringMatching(/^this worker's clock is 3600\.0 s ahead of its state store's: its schedule keeps the store's time/) });
  });

  it('a store whose clock was read an hour ahead and then stepped back: the claim made by the wrong reading is refused and said, and the schedule goes on on time', async () => {
    const f = fleet();
    let reads = 0;
    // The store's clock as a server's stepped back: its second reading (the first look's) an hour ahead.
    const stepped: ClaimStore = { ...f.store, storeClock: async () => (await f.store.storeClock()) + (++reads === 2 ? HOUR : 0) };
    const worker = f.worker('w1', { schedule: { cron: '*/10 * * * *' }, store: stepped });
    await until(f, T0 + 25 * MINUTE);
    await worker.stop();
    expect(f.news).toContainEqual(expect.objectContaining({ dueAt: new Date(T0 + 10 * MINUTE).toISOString(), message: expect.stringMatching(/^not claimed: due 599\.0 s after the state store's clock \(2026-03-02T00:00:01\.000Z\); this worker's time was ahead$/) }));
    // Nothing was recorded missed, nothing ahead: the occurrences ran when due.
    expect((await occurrences(f)).map((o) => [o.due, o.outcome])).toEqual([
      [10, 'started'],
      [20, 'started'],
    ]);
    expect(f.launches.map((l) => (l.at - T0) / MINUTE)).toEqual([10, 20]);
  });

  it('ten workers on one store: one claim and one run per occurrence', async () => {
    const f = fleet();
    const workers = Array.from({ length: 10 }, (_, i) => f.worker(`w${i}`));
    await until(f, T0 + 4 * HOUR + 30 * MINUTE);
    await Promise.all(workers.map((w) => w.stop()));
    const rows = await occurrences(f);
    expect(rows.map((r) => [r.due, r.outcome])).toEqual([60, 120, 180, 240].map((due) => [due, 'started']));
    expect(new Set(rows.map((r) => r.runId)).size).toBe(4);
    expect(f.launches).toHaveLength(4);
    expect((await f.store.runs('p')).map((run) => run.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
  });

  it('a distributed pipeline: the claimant starts the run, every other worker joins that run and starts none', async () => {
    const f = fleet();
    const workers = Array.from({ length: 3 }, (_, i) => f.worker(`w${i}`, { shared: true }));
    await until(f, T0 + 2 * HOUR + 30 * MINUTE);
    await Promise.all(workers.map((w) => w.stop()));
    const rows = await occurrences(f);
    expect(rows.map((r) => r.outcome)).toEqual(['started', 'started']);
    for (const row of rows) {
      const launches = f.launches.filter((l) => l.at >= T0 + row.due * MINUTE && l.at < T0 + (row.due + 60) * MINUTE);
      expect(launches.filter((l) => l.take.kind === 'start')).toHaveLength(1);
      // The others continue the run the claimant started, once it has begun.
      expect(launches.filter((l) => l.take.kind === 'continue').map((l) => (l.take as { runId: string }).runId)).toEqual([row.runId, row.runId]);
    }
  });

  it("missed: 'once' — a worker down across two occurrences makes one catch-up run when it is up again, and both are recorded", async () => {
    const f = fleet();
    const schedule = { cron: '0 6 * * *', timezone: 'Europe/Berlin', missed: 'once' };
    const first = f.worker('w1', { schedule });
    await until(f, T0 + DAY);
    await first.stop();
    // Down across the occurrences of 3 and 4 March (06:00 in Berlin: 05:00 UTC), up again at noon on the 4th.
    await until(f, T0 + 2 * DAY + 12 * HOUR);
    const second = f.worker('w2', { schedule });
    await until(f, T0 + 2 * DAY + 13 * HOUR);
    await second.stop();
    const rows = (await f.store.occurrences('p')).reverse();
    expect(rows.map((o) => [o.dueAt, o.outcome, o.runId])).toEqual([
      ['2026-03-02T05:00:00.000Z', 'started', 'run-1'],
      ['2026-03-03T05:00:00.000Z', 'missed', null],
      ['2026-03-04T05:00:00.000Z', 'started', 'run-2'],
    ]);
    expect(rows[1]?.note).toBe('due while no worker was up to claim it');
    expect(rows[2]?.note).toBe('catch-up: 2 occurrences were due while no worker was up (missed: once)');
    // One catch-up run, started as soon as the worker was up.
    expect(f.launches.map((l) => new Date(l.at).toISOString())).toEqual(['2026-03-02T05:00:00.000Z', '2026-03-04T12:00:00.000Z']);
    // The webhooks are told once of what the look recorded missed, and of the catch-up.
    expect(f.toldMissed).toEqual([{ dueAts: ['2026-03-03T05:00:00.000Z'], more: false, catchUp: '2026-03-04T05:00:00.000Z' }]);
  });

  it("missed: 'skip' — the same gap makes no run, and both occurrences are recorded missed", async () => {
    const f = fleet();
    const schedule = { cron: '0 6 * * *', timezone: 'Europe/Berlin', missed: 'skip' };
    const first = f.worker('w1', { schedule });
    await until(f, T0 + DAY);
    await first.stop();
    await until(f, T0 + 2 * DAY + 12 * HOUR);
    const second = f.worker('w2', { schedule });
    // The next day's occurrence comes due with the worker up: it runs.
    await until(f, T0 + 3 * DAY + 6 * HOUR);
    await second.stop();
    const rows = (await f.store.occurrences('p')).reverse();
    expect(rows.map((o) => [o.dueAt, o.outcome])).toEqual([
      ['2026-03-02T05:00:00.000Z', 'started'],
      ['2026-03-03T05:00:00.000Z', 'missed'],
      ['2026-03-04T05:00:00.000Z', 'missed'],
      ['2026-03-05T05:00:00.000Z', 'started'],
    ]);
    expect(rows[2]?.note).toBe('due while no worker was up to claim it; missed: skip');
    expect(f.launches).toHaveLength(2);
    expect(f.toldMissed).toEqual([{ dueAts: ['2026-03-03T05:00:00.000Z', '2026-03-04T05:00:00.000Z'], more: false, catchUp: null }]);
  });

  it('a long gap on a cron of minutes: a bounded number of rows, the latest, and a note that there were more', async () => {
    const f = fleet({ takes: 10_000 });
    const schedule = { cron: '* * * * *' };
    const first = f.worker('w1', { schedule });
    await until(f, T0 + 90_000);
    await first.stop();
    await until(f, T0 + 5 * HOUR + 30_000);
    const second = f.worker('w2', { schedule });
    await until(f, T0 + 5 * HOUR + 40_000);
    await second.stop();
    const rows = (await f.store.occurrences('p')).reverse();
    // The first occurrence ran; then MOST_DUE_AT_ONCE: the latest missed, and the catch-up.
    expect(rows).toHaveLength(1 + MOST_DUE_AT_ONCE);
    expect(rows[1]?.note).toMatch(/^due while no worker was up to claim it \(and earlier ones since 2026-03-02T00:01:00\.000Z, not recorded\)$/);
    expect(rows.at(-1)).toMatchObject({ dueAt: new Date(T0 + 5 * HOUR).toISOString(), outcome: 'started', note: 'catch-up: 100+ occurrences were due while no worker was up (missed: once)' });
    expect(f.toldMissed).toEqual([{ dueAts: rows.slice(1, -1).map((o) => o.dueAt), more: true, catchUp: new Date(T0 + 5 * HOUR).toISOString() }]);
  });

  it('a first start records nothing from before it was up: no history to catch up', async () => {
    const f = fleet({ start: T0 + 6 * HOUR + 30 * MINUTE });
    const worker = f.worker('w1', { schedule: { cron: '0 6 * * *', missed: 'once' } });
    await until(f, T0 + 7 * HOUR);
    await worker.stop();
    expect(await f.store.occurrences('p')).toEqual([]);
    expect(f.launches).toEqual([]);
  });

  it("a run stopped with its worker is taken up again when a worker starts: the same run, no new occurrence", async () => {
    const f = fleet({ takes: 30 * MINUTE });
    const first = f.worker('w1');
    await until(f, T0 + HOUR + 10 * MINUTE);
    // Stopped mid-run: the stand-in ends it interrupted, as a run stopped by SIGTERM ends.
    await first.stop();
    expect((await f.store.latestRun('p'))?.status).toBe('interrupted');
    await until(f, T0 + HOUR + 20 * MINUTE);
    const second = f.worker('w2');
    await until(f, T0 + HOUR + 55 * MINUTE);
    await second.stop();
    expect(f.launches.map((l) => [(l.at - T0) / MINUTE, l.take])).toEqual([
      [60, { kind: 'start' }],
      [80, { kind: 'continue', runId: 'run-1' }],
    ]);
    expect(await occurrences(f)).toEqual([{ due: 60, outcome: 'started', runId: 'run-1' }]);
    expect(await f.store.latestRun('p')).toMatchObject({ runId: 'run-1', status: 'completed', invocations: 2 });
  });

  it('an occurrence whose run is at work elsewhere is skipped; one whose run cannot start is failed, with why', async () => {
    const f = fleet();
    const outcomes: LaunchOutcome[] = [{ kind: 'busy', message: 'pipeline "p" is already running (pid 7 on h)' }, { kind: 'failed', message: 'Invalid pipeline: rate.concurrency must be positive' }];
    const worker = f.worker('w1', {
      launch: async (_take, hooks) => {
        const outcome = outcomes.shift();
        if (outcome) return outcome;
        hooks.onStart({ runId: 'r', resumed: false });
        return { kind: 'ran', runId: 'r', status: 'completed' };
      },
    });
    await until(f, T0 + 3 * HOUR + 30 * MINUTE);
    await worker.stop();
    const rows = (await f.store.occurrences('p')).reverse();
    expect(rows.map((o) => [o.outcome, o.note])).toEqual([
      ['skipped', `the pipeline's run was still at work: pipeline "p" is already running (pid 7 on h)`],
      ['failed', 'Invalid pipeline: rate.concurrency must be positive'],
      ['started', null],
    ]);
  });

  it("a claim whose answer was lost is read back: the row says it is this worker's, and its run starts; another's is left to it", async () => {
    const f = fleet();
    let lost = 0;
    // The insert reaches the store, its answer does not (a connection cut on the way back).
    const flaky: ClaimStore = {
      ...f.store,
      claimOccurrence: async (claim) => {
        await f.store.claimOccurrence(claim);
        lost += 1;
        throw new Error('Connection terminated unexpectedly');
      },
    };
    const worker = f.worker('w1', { store: flaky });
    await until(f, T0 + HOUR + 30 * MINUTE);
    await worker.stop();
    expect(lost).toBe(1);
    expect(await occurrences(f)).toEqual([{ due: 60, outcome: 'started', runId: 'run-1' }]);
    // Another worker's claim, found the same way (it took the row first), is not taken for this one's.
    const beaten: ClaimStore = {
      ...f.store,
      claimOccurrence: async (claim) => {
        await f.store.claimOccurrence({ ...claim, worker: 'w2' });
        await f.store.claimOccurrence(claim);
        throw new Error('Connection terminated unexpectedly');
      },
    };
    const second = f.worker('w1', { store: beaten });
    await until(f, T0 + 2 * HOUR + 30 * MINUTE);
    await second.stop();
    expect(f.launches).toHaveLength(1);
    expect((await f.store.occurrences('p', { limit: 1 }))[0]).toMatchObject({ outcome: 'claimed', worker: 'w2' });
  });

  it('stopping waits for the run at work, which hears the stop; no new run is taken after it', async () => {
    const f = fleet({ takes: 3 * HOUR });
    const worker = f.worker('w1');
    await until(f, T0 + HOUR + 5 * MINUTE);
    await worker.stop();
    await until(f, T0 + 5 * HOUR);
    expect(f.launches).toHaveLength(1);
    expect(await f.store.latestRun('p')).toMatchObject({ runId: 'run-1', status: 'interrupted' });
  });
});

describe('the schedule field', () => {
  it('validates the pattern, the zone and missed, naming the field; defaults to UTC and once', () => {
    const base = { name: 'p', source: searchPages({ queries: ['a'], countries: ['us'] }), stages: [normalize()], sinks: [toSqlite({ path: 'x.sqlite' })] };
    expect(definePipeline({ ...base, schedule: { cron: '0 6 * * *' } }).schedule).toEqual({ cron: '0 6 * * *', timezone: 'UTC', missed: 'once' });
    expect(() => definePipeline({ ...base, schedule: { cron: '61 * * * *' } })).toThrow(/schedule\.cron: must be a cron pattern/);
    expect(() => definePipeline({ ...base, schedule: { cron: '0 6 * * *', timezone: 'Mars/Olympus' } })).toThrow(/schedule\.timezone: must be an IANA time zone/);
    expect(() => definePipeline({ ...base, schedule: { cron: '0 6 * * *', missed: 'all' as 'once' } })).toThrow(/schedule\.missed/);
  });
});

describe('run() as a scheduled occurrence takes it (RunTake)', () => {
  const pipeline = (path: string) =>
    definePipeline({ name: 'taken', source: searchPages({ queries: ['a', 'b'], countries: ['us'], maxPages: 2 }), stages: [normalize()], sinks: [toSqlite({ path })] });

  it('continue: the named run resumed while it is the unfinished one; nothing at all once it has ended or is not the latest', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const stop = new AbortController();
    stop.abort('test');
    // A run stopped before it began: unfinished.
    const stopped = await runOn(sim, pipeline(dir.path('out.sqlite')), { signal: stop.signal });
    expect(stopped.status).toBe('interrupted');
    const requests = sim.stats().requests;
    const other = await rejection(runOn(sim, pipeline(dir.path('out.sqlite')), { take: { kind: 'continue', runId: 'run-x' } }));
    expect(other).toBeInstanceOf(RunEndedError);
    expect(other.message).toMatch(/run run-x of pipeline "taken" is no longer the pipeline's latest \(\S+ is\): nothing to join or resume/);
    expect(sim.stats().requests).toBe(requests);
    const resumed = await runOn(sim, pipeline(dir.path('out.sqlite')), { take: { kind: 'continue', runId: stopped.runId } });
    expect(resumed).toMatchObject({ runId: stopped.runId, status: 'completed' });
    const ended = await rejection(runOn(sim, pipeline(dir.path('out.sqlite')), { take: { kind: 'continue', runId: stopped.runId } }));
    expect(ended).toBeInstanceOf(RunEndedError);
    expect(ended.message).toMatch(/ended \(completed\): nothing to join or resume/);
    // start: a new run, as a plain invocation.
    const started = await runOn(sim, pipeline(dir.path('out.sqlite')), { take: { kind: 'start' } });
    expect(started.runId).not.toBe(stopped.runId);
  });
});

describePostgres('run() as a scheduled occurrence takes a distributed run (RunTake)', () => {
  it('start: refused while the run has workers at work (the occurrence is skipped, not a second start of it)', async () => {
    await using sim = await simulator();
    const db = await testDatabase();
    try {
      const pipeline = definePipeline({
        name: 'shared',
        source: searchPages({ queries: ['a', 'b', 'c'], countries: ['us'], maxPages: 2 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'results' })],
        state: { url: db.url },
      });
      const gate = sim.park();
      const working = runOn(sim, pipeline);
      await gate.reached(1);
      const refused = await rejection(runOn(sim, pipeline, { take: { kind: 'start' } }));
      expect(refused).toBeInstanceOf(RunAtWorkError);
      expect(refused.message).toMatch(/^run \S+ of pipeline "shared" is at work: a scheduled occurrence does not start another while it is$/);
      gate.release();
      expect((await working).status).toBe('completed');
    } finally {
      await db.drop();
    }
  });
});
