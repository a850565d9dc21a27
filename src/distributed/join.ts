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
  return {
    shared: true,
    hold: (pipeline, decide) => planningLock(store, pipeline, decide),
    atWork: async (runId) => (await workersAtWork(store, runId)) > 0,
    host: (run, lock) => joinRun({ ...run, store, planningLock: lock }),
  };
}

interface Joining extends HostedRun {
  store: PostgresStateStore;
  /** The planning lock this process holds since it decided what the run is: let go once it is a worker. */
  planningLock: Lease;
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
  // Read first: a bad value stops the process before it plans or registers.
  const commitWindow = workerCommitWindow();
  const boss = await openBoss(store.pool, store.schema);
  phase('boss-started');
  try {
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
