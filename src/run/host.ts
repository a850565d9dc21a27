import { dedupesAcrossSeries } from '../distributed/distributable.ts';
import type { RunHost } from '../host/run-host.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { Pipeline } from '../config/define.ts';
import type { Held, OpenedRun } from './open-run.ts';

/**
 * The run's host (docs/design.md#the-run-host), made where the opening decided the run runs (`opened.hosting`): this
 * process alone, under the pipeline's lease, or one of a distributed run's workers, which lets the planning lock go.
 * From here on the host holds what `held.lease` held, and lets go of it when it leaves.
 */
export async function hostFor(pipeline: Pipeline, plan: SourcePlan, opened: OpenedRun, spentBefore: number, held: Held): Promise<RunHost> {
  const { decision } = opened;
  held.host = await opened.hosting.host(
    {
      pipeline: pipeline.name,
      runId: opened.runId,
      plan,
      joining: opened.joining,
      invocation: opened.invocation,
      budget: decision.budget?.maxCredits ?? null,
      retryFailed: decision.mode === 'resume' && decision.retryFailed,
      weights: pipeline.credits.weights,
      spentBefore,
      claimsKeys: dedupesAcrossSeries(pipeline.stages),
    },
    opened.lock,
  );
  held.lease = undefined;
  return held.host;
}
