// `webdata-etl worker` over one pipeline in virtual time: its loop (src/recurring/worker-loop.ts) on a virtual clock,
// claiming in the pipeline's SQLite state store whose clock is that clock's wall time, and each occurrence's run a real
// run() over real sockets (the CLI's launcher runs the pipeline file on a thread; this, the pipeline in this process,
// as worker-loop.test.ts's real runs do). Time stands still while a run is at work (the virtual clock held): the run
// keeps its own clock, real time from the virtual instant it began at — the SQLite store's clock in the run — so that
// a day's occurrences are minutes of virtual time apart and a run's pacing waits as it would. No vitest here: the month
// in virtual time (test/bench/allowance-month.ts) uses it too.
import { databaseRegistry } from '../../src/run/databases.ts';
import { definePipeline, type Pipeline, type PipelineDefinition } from '../../src/config/define.ts';
import type { RunTake } from '../../src/recurring/run-take.ts';
import { type Launch, type LaunchOutcome, type ScheduleNews, WorkerLoop } from '../../src/recurring/worker-loop.ts';
import { run } from '../../src/run/run.ts';
import type { RunEvent, RunOptions } from '../../src/run/run-types.ts';
import type { RunSummary } from '../../src/run/summary.ts';
import { statePath } from '../../src/run/outputs.ts';
import { type Clock, systemClock, type VirtualClock } from '../../src/schedule/clock.ts';
import { openStateStore } from '../../src/state/open/open-state-store.ts';
import type { StateStore } from '../../src/state/interfaces.ts';

/** A run's clock from the virtual instant it begins at: real time on from there (its waits real, and short). */
function runClock(clock: VirtualClock): Clock {
  const at = clock.epoch?.() as number;
  const from = Date.now();
  return { now: () => systemClock.now(), sleep: (ms, signal) => systemClock.sleep(ms, signal), epoch: () => at + (Date.now() - from) };
}

export interface VirtualWorker {
  store: StateStore;
  /** What the loop said, in order. */
  news: ScheduleNews[];
  /** Each run's summary, with the virtual instant it was launched at and how it was taken. */
  runs: { at: number; take: RunTake; summary?: RunSummary; events: RunEvent[]; failure?: string }[];
  /** Virtual time passes until `at` (ms since the epoch): the loop's occurrences before it are run, in order. */
  until(at: number): Promise<void>;
  /** Stops the loop; resolves once its runs are over. */
  stop(): Promise<void>;
  /** Stops the loop, and closes the store. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A worker's loop over `definition` (which needs a schedule), its runs sent with `options` (address, key, env). */
export async function virtualWorker(clock: VirtualClock, definition: PipelineDefinition, options: RunOptions): Promise<VirtualWorker> {
  const pipeline = definePipeline(definition) as Pipeline & { schedule: NonNullable<Pipeline['schedule']> };
  const databases = databaseRegistry();
  const epoch = () => clock.epoch?.() as number;
  // The worker's store, as `webdata-etl worker` opens it (claimStore), its clock the virtual one's wall time.
  const store = await openStateStore({ kind: 'sqlite', db: databases.get(statePath(pipeline)), clock: epoch });
  const news: ScheduleNews[] = [];
  const runs: VirtualWorker['runs'] = [];
  const stop = new AbortController();
  const launch: Launch = async (take, hooks): Promise<LaunchOutcome> => {
    // Taken at once, before the loop sleeps again: no occurrence comes due while the run is at work.
    const release = clock.hold?.() ?? (() => undefined);
    const record: VirtualWorker['runs'][number] = { at: epoch(), take, events: [] };
    runs.push(record);
    let runId: string | undefined;
    try {
      const summary = await run(pipeline, {
        ...options,
        take,
        clock: runClock(clock),
        signal: stop.signal,
        onEvent: (event) => {
          record.events.push(event);
          if (event.type !== 'start') return;
          runId = event.runId;
          hooks.onStart({ runId, resumed: event.resumed && event.worker?.joined !== true });
        },
      });
      record.summary = summary;
      return { kind: 'ran', runId: summary.runId, status: summary.status };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      record.failure = message;
      const name = error instanceof Error ? error.name : '';
      if (name === 'LeaseHeldError' || name === 'RunAtWorkError') return { kind: 'busy', message };
      if (name === 'RunEndedError') return { kind: 'ended', message };
      return { kind: 'failed', message, runId };
    } finally {
      release();
    }
  };
  const loop = new WorkerLoop({
    pipeline: { name: pipeline.name, schedule: pipeline.schedule, shared: false },
    store,
    launch,
    worker: 'virtual-worker',
    stop: stop.signal,
    clock,
    say: (item) => news.push(item),
  });
  const running = loop.run();
  return {
    store,
    news,
    runs,
    until: (at) => clock.sleep(Math.max(0, at - epoch())),
    async stop() {
      stop.abort();
      await running;
    },
    async [Symbol.asyncDispose]() {
      stop.abort();
      await running;
      await store.close();
      await databases.closeAll();
    },
  };
}
