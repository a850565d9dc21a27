import type { Series } from '../pipeline/page.ts';
import type { SourceContext } from '../sources/source.ts';
import { StageContractError } from '../errors/stage-contract-error.ts';
import type { RunHost } from '../host/run-host.ts';

/** The series a host hands this process, as sources see them, and the check that a page is of one of them. */
export interface HandedSeries {
  /** What sources page (`ctx.feed`): the host's feed, each series remembered as it is handed; absent: all of them. */
  feed: SourceContext['feed'];
  /** Throws when a source pages a series the host did not hand this process. */
  check(series: Series): void;
}

/**
 * A worker pages only the series the run's queue hands it (`host.feed`). A source of the user's own that ignores the
 * feed would page every series: the pages of those this worker never took are refused at their commit as another
 * worker's, and the run would end "completed" without them. So such a page fails the run, naming the contract, and
 * is checked before the series' first request where the source asks where it stands (`progress`).
 */
export function handedSeries(host: Pick<RunHost, 'feed'>): HandedSeries {
  const feed = host.feed;
  if (!feed) return { feed: undefined, check: () => undefined };
  const handed = new Set<string>();
  return {
    feed: (all, again) => {
      const inner = feed(all, again);
      return {
        async next() {
          const next = await inner.next();
          if (!next.done) handed.add(next.value.id);
          return next;
        },
        unused: (series) => inner.unused(series),
      };
    },
    check(series) {
      if (handed.has(series.id)) return;
      throw new StageContractError(
        `the source paged series "${series.id}", which the run's queue did not hand this worker: in a distributed run a source must page the series ctx.feed hands it (defineSource's sources do)`,
      );
    },
  };
}
