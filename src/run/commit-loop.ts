import { throughStages } from '../pipeline/compose.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { createCommitter } from './commit.ts';
import type { Pipeline } from '../config/define.ts';
import type { RunEvent } from './run-types.ts';
import type { SourceWiring } from './wiring.ts';

/**
 * The run's main loop: pages come out of the source through the stages, and each is committed once (rows, progress,
 * stage state and spend in one transaction) before the series that sent it goes on. Up to `window` pages are
 * committing at once (in order, one transaction after another): the next page goes through the stages meanwhile,
 * which is what lets a commit thread, or a database server, work while this thread does. Resolves to the failure
 * that ended the loop, if one did; what is in flight is then cancelled (it could not be committed anyway).
 */
export async function commitPages(
  pipeline: Pipeline,
  source: SourceWiring,
  committer: ReturnType<typeof createCommitter>,
  scheduler: Scheduler,
  emit: (event: RunEvent) => void,
  window = 1,
): Promise<unknown> {
  const committing = new Set<Promise<void>>();
  // The first page that failed to commit (the pages after it fail with it): it ends the loop.
  let failed: { error: unknown } | undefined;
  // The source and requests stop at once: the loop may be waiting for a page that cannot come (every permit held by a
  // page that will never commit), so the failure must reach it through the source, not wait for its next step.
  const stop = (error: unknown) => {
    source.abort.abort(error);
    scheduler.abort();
  };
  const stopIfFailed = () => {
    if (failed) throw failed.error;
  };
  try {
    for await (const page of throughStages<unknown>(pipeline.source.pages(source.ctx), pipeline.stages, source.ctx)) {
      source.checkPage(page);
      // From handing the page over to its commit being durable (behind the pages before it in the window).
      const handedOver = performance.now();
      const committed = committer.commit(page).then(async (result) => {
        // Refused as another worker's: the series' job goes at once, whatever the series does next. Its source may
        // never say 'lost' (this page was its last: it ended by its own rule), and a job held by a worker that waits
        // for the run's end is touched at every beat and never lapses to anyone: the fleet would wait for ever.
        if (result.lost) await source.pageLost(page.series.id);
        source.processed(page.key, result);
        emit({
          type: 'page',
          key: page.key,
          series: page.series.id,
          number: page.number,
          items: page.items.length,
          served: page.meta.served,
          duplicates: page.meta.dedupe?.duplicates ?? 0,
          commitMs: performance.now() - handedOver,
        });
      });
      // Settled either way, it leaves the window; a failure is kept and stops the source, which ends the loop.
      const done: Promise<void> = committed.then(
        () => void committing.delete(done),
        (error: unknown) => {
          committing.delete(done);
          failed ??= { error };
          stop(error);
        },
      );
      committing.add(done);
      stopIfFailed();
      if (committing.size >= window) await Promise.race(committing);
      stopIfFailed();
    }
    await Promise.all(committing);
    stopIfFailed();
    return undefined;
  } catch (error) {
    stop(error);
    // The pages after the one that failed fail with it (they commit in order): none is left running.
    await Promise.all(committing);
    return error;
  }
}
