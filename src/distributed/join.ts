import type { PgBoss } from 'pg-boss';
import type { HostedRun, Hosting } from '../host/hosting.ts';
import type { RunHost } from '../host/run-host.ts';
import { atDatabase } from '../postgres/failure.ts';
import type { Lease } from '../state/interfaces.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';
import { openBoss, queueName } from './boss.ts';
import { workersAtWork } from './liveness.ts';
import { planningLock, planRun } from './plan-run.ts';
import { postgresHost, workerCommitWindow } from './postgres-host.ts';
import { RunWorker } from './worker.ts';
import { phase } from '../phase-marks.ts';

/**
 * A distributed run (docs/design.md#the-run-host): decided under the planning lock, joined as one of its workers, whose
 * host is `postgresHost`. `store` is the state store, which the run's outputs share (`distributable`).
 */
export function postgresHosting(store: PostgresStateStore): Hosting {
  let boss: EarlyBoss | undefined;
  return {
    shared: true,
    async hold(pipeline, decide) {
      // pg-boss starts while this process waits for the planning lock: planner and joiner need it alike, and a
      // joiner's wait is the planner's planning (docs/benchmarks.md#joining-a-run).
      const early = (boss = earlyBoss(store));
      try {
        const { lock, decided } = await planningLock(store, pipeline, decide);
        // A run that fails before it has a host lets go of the lock, and stops the pg-boss nobody took (its timers).
        return { decided, lock: { release: async () => void (await Promise.all([lock.release(), early.drop()])) } };
      } catch (error) {
        await early.drop();
        throw error;
      }
    },
    atWork: async (runId) => (await workersAtWork(store, runId)) > 0,
    host: (run, lock) => joinRun({ ...run, store, planningLock: lock, boss: (boss ?? earlyBoss(store)).take() }),
  };
}

/** pg-boss started ahead of its use: taken by the host, or stopped by `drop` (once the run failed before it). */
interface EarlyBoss {
  take(): Promise<PgBoss>;
  drop(): Promise<void>;
}

function earlyBoss(store: PostgresStateStore): EarlyBoss {
  const starting = openBoss(store.pool, store.schema).then((boss) => {
    phase('boss-started');
    return boss;
  });
  // A failure to start is reported by whoever awaits it (the host, as the job queue's); unawaited, it is dropped.
  starting.catch(() => undefined);
  let taken = false;
  return {
    take() {
      taken = true;
      return starting;
    },
    async drop() {
      if (taken) return;
      taken = true;
      const boss = await starting.catch(() => undefined);
      await boss?.stop({ graceful: false, close: false }).catch(() => undefined);
    },
  };
}

interface Joining extends HostedRun {
  store: PostgresStateStore;
  /** The planning lock this process holds since it decided what the run is: let go once it is a worker. */
  planningLock: Lease;
  /** pg-boss, started as this process waited for the planning lock (`openBoss`). */
  boss: Promise<PgBoss>;
}

/**
 * Makes this process a worker of the run, and that its host (docs/design.md#the-run-host): plans the run (a new run,
 * or a run no worker is at: each invocation plans again) or joins the planning at work, and registers. The planning
 * lock is held until then, so that a process starting alongside sees either no run or a planned one with a live
 * worker. A failure here (the job queue's schema, the worker's rows) is explained as the state store's are.
 */
function joinRun(joining: Joining): Promise<RunHost> {
  return atDatabase(`the job queue in ${joining.store.path}`, () => join(joining));
}

async function join(joining: Joining): Promise<RunHost> {
  // The number of this planning of the run: its invocation.
  const { store, invocation: planningNumber } = joining;
  const boss = await joining.boss;
  try {
    // Read first: a bad value stops the process before it plans or registers.
    const commitWindow = workerCommitWindow();
    const queue = joining.joining
      ? queueName(joining.pipeline, joining.runId, planningNumber)
      : await planRun(boss, store, {
          pipeline: joining.pipeline,
          runId: joining.runId,
          planningNumber,
          series: joining.plan.series(),
          budget: joining.budget,
          retryFailed: joining.retryFailed,
          spentBefore: joining.spentBefore,
        });
    phase(joining.joining ? 'joined-queue' : 'planned');
    const worker = await RunWorker.start({ store, boss, runId: joining.runId, queue, planningNumber, seriesTotal: joining.plan.seriesCount, weights: joining.weights });
    phase('worker-registered');
    await joining.planningLock.release();
    return postgresHost(worker, { store, runId: joining.runId, joined: joining.joining, claimsKeys: joining.claimsKeys, commitWindow });
  } catch (error) {
    await boss.stop({ graceful: false, close: false }).catch(() => undefined);
    throw error;
  }
}
