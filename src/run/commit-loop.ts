import { throughStages } from '../pipeline/compose.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { createCommitter } from './commit.ts';
import type { Pipeline } from './define.ts';
import type { RunEvent } from './run-types.ts';
import type { SourceWiring } from './wiring.ts';

/**
 * The run's main loop: pages come out of the source through the stages, and each is committed once (rows, progress,
 * stage state and spend in one transaction) before the series that sent it goes on. Resolves to the failure that
 * ended the loop, if one did; what is in flight is then cancelled (it could not be committed anyway).
 */
export async function commitPages(
  pipeline: Pipeline,
  source: SourceWiring,
  committer: ReturnType<typeof createCommitter>,
  scheduler: Scheduler,
  emit: (event: RunEvent) => void,
): Promise<unknown> {
  try {
    for await (const page of throughStages<unknown>(pipeline.source.pages(source.ctx), pipeline.stages, source.ctx)) {
      source.processed(page.key, await committer.commit(page));
      emit({
        type: 'page',
        key: page.key,
        series: page.series.id,
        number: page.number,
        items: page.items.length,
        served: page.meta.served,
        duplicates: page.meta.dedupe?.duplicates ?? 0,
      });
    }
    return undefined;
  } catch (error) {
    source.abort.abort(error);
    scheduler.abort();
    return error;
  }
}
