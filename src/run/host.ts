import { dedupesAcrossSeries } from '../distributed/distributable.ts';
import { joinRun } from '../distributed/join.ts';
import { localHost } from '../host/local-host.ts';
import type { RunHost } from '../host/run-host.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { Pipeline } from '../config/define.ts';
import type { Decision } from './lifecycle.ts';
import type { Held, OpenedRun } from './open-run.ts';

/**
 * Where the run runs (docs/design.md#the-run-host): a distributed run (`opened.distributed`) is joined as one of its
 * workers, which lets the planning lock go; any other runs in this process alone, under the pipeline's lease. From
 * here on the host holds what `held.lease` held, and lets go of it when it leaves.
 */
export async function hostFor(pipeline: Pipeline, plan: SourcePlan, opened: OpenedRun, decision: Decision, spentBefore: number, held: Held): Promise<RunHost> {
  if (!opened.distributed || !held.lease) {
    held.host = localHost(opened.store, held.lease);
  } else {
    held.host = await joinRun({
      pipeline: pipeline.name,
      runId: opened.runId,
      plan,
      distributed: opened.distributed,
      budget: decision.budget?.maxCredits ?? null,
      weights: pipeline.credits.weights,
      spentBefore,
      retryFailed: decision.mode === 'resume' && decision.retryFailed,
      planningLock: held.lease,
      claimsKeys: dedupesAcrossSeries(pipeline.stages),
    });
  }
  held.lease = undefined;
  return held.host;
}
