import type { Series } from '../pipeline/page.ts';

// What a worker keeps of the plan it reads (series-queue.ts): a window of the series read last, by source.

/**
 * A source's plan as a worker reads it: `all` read on as far as the jobs need (`read` series so far), `again` its
 * plan read anew from the start, if the source can, and the series set aside for its feed (jobs of its series fetched
 * while another source's feed asked). `window` holds the series read last: at most `WINDOW` of them when the plan can
 * be read again (those before are found by reading it again), all of them when it cannot.
 */
export interface Reader {
  all: Iterator<Series>;
  again: (() => Iterator<Series>) | undefined;
  feed: Series[];
  read: number;
  done: boolean;
  window: Map<string, Series>;
  /** The ids in the window in the order they came, `at` the slot of the oldest (`remember`). */
  ring: (string | undefined)[];
  at: number;
}

/**
 * Series a reader keeps of what it read last: jobs on their first attempt come out of the queue in the order of
 * their planning statements (a thousand jobs each, two at once, in any order among themselves: `PLAN_INSERTS` in
 * plan-run.ts), so a job taken by this worker is rarely more than a few statements behind what it read. A few MB.
 */
export const WINDOW = 10_000;

/** Series read between two yields to the event loop while a plan is read far (a late joiner, a series looked for). */
export const YIELD_EVERY = 5_000;

/**
 * Keeps a series read in the reader's window; once it holds `WINDOW`, the series read longest ago goes. A ring of
 * their ids says which: a Map used as a queue (its oldest found by `keys()` at each insertion) took 23–28 s per
 * million series read here, for the holes its deletions leave at its start; the ring, 1 s.
 */
export function remember(reader: Reader, series: Series): void {
  reader.window.set(series.id, series);
  if (!reader.again) return;
  const oldest = reader.ring[reader.at];
  // Gone already when its job was done (`done`): deleting it again is nothing.
  if (oldest !== undefined) reader.window.delete(oldest);
  reader.ring[reader.at] = series.id;
  reader.at = (reader.at + 1) % WINDOW;
}

export const yieldToTimers = () => new Promise<void>((resolve) => setImmediate(resolve));
