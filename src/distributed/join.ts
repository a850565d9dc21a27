import type { RunHost } from '../host/run-host.ts';
import { atDatabase } from '../postgres/failure.ts';
import type { Lease } from '../state/interfaces.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';
import type { SourcePlan } from '../sources/source.ts';
import { openBoss, queueName } from './boss.ts';
import { planRun } from './plan-run.ts';
import { postgresHost } from './postgres-host.ts';
import { RunWorker } from './worker.ts';
import { phase } from '../phase-marks.ts';

export interface Joining {
  pipeline: string;
  runId: string;
  plan: SourcePlan;
  /** The opened run's distributed part (run/open-run.ts): `planningNumber` is the number of this planning of the run (its invocation). */
  distributed: { store: PostgresStateStore; joining: boolean; planningNumber: number };
  budget: number | null;
  retryFailed: boolean;
  /** Credits per request by endpoint path. */
  weights: Readonly<Record<string, number>>;
  /** Spend of the run before this planning (a run that predates its shared budget row starts from it). */
  spentBefore: number;
  /** The planning lock this process holds since it decided what the run is: let go once it is a worker. */
  planningLock: Lease;
  /** The run's dedupe looks across series: each page's keys are claimed against the other workers. */
  claimsKeys: boolean;
}

/**
 * Makes this process a worker of the run, and that its host (docs/design.md#the-run-host): plans the run (a new run,
 * or a run no worker is at: each invocation plans again) or joins the planning at work, and registers. The planning
 * lock is held until then, so that a process starting alongside sees either no run or a planned one with a live
 * worker. A failure here (the job queue's schema, the worker's rows) is explained as the state store's are.
 */
export function joinRun(joining: Joining): Promise<RunHost> {
  return atDatabase(`the job queue in ${joining.distributed.store.path}`, () => join(joining));
}

async function join(joining: Joining): Promise<RunHost> {
  const { store, planningNumber } = joining.distributed;
  const boss = await openBoss(store.pool, store.schema);
  phase('boss-started');
  try {
    const queue = joining.distributed.joining
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
    phase(joining.distributed.joining ? 'joined-queue' : 'planned');
    const worker = await RunWorker.start({ store, boss, runId: joining.runId, queue, planningNumber, seriesTotal: joining.plan.seriesCount, weights: joining.weights });
    phase('worker-registered');
    await joining.planningLock.release();
    return postgresHost(worker, { store, runId: joining.runId, joined: joining.distributed.joining, claimsKeys: joining.claimsKeys });
  } catch (error) {
    await boss.stop({ graceful: false, close: false }).catch(() => undefined);
    throw error;
  }
}
