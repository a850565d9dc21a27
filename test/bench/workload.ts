// The work a harvest gives the scheduler: many series, each paging strictly in sequence (a page's outcome decides
// whether there is a next one), so the scheduler never sees more than one request per series at a time. That is
// what limits how far ahead it can queue, and why the number of series matters for keeping the rate up.
import { type Client, SEARCH_PATH } from '../../src/client/index.ts';
import { type Scheduler, type SchedulerEvent, type StopReason } from '../../src/schedule/index.ts';

export interface WorkPlan {
  series: number;
  pagesPerQuery: number;
  /** Queries per series; omitted: endless (each series moves to a new query after its last page). */
  queriesPerSeries?: number;
}

export interface WorkTally {
  planned: number | null;
  fetched: number;
  /** Pages whose outcome was a failure after the scheduler's own retries. */
  failed: number;
  /** Series ended by a stop, by reason (the window ending, a budget). */
  stoppedSeries: Partial<Record<StopReason, number>>;
}

export async function runWork(scheduler: Scheduler, client: Client, plan: WorkPlan): Promise<WorkTally> {
  const queries = plan.queriesPerSeries ?? Number.POSITIVE_INFINITY;
  const tally: WorkTally = {
    planned: Number.isFinite(queries) ? plan.series * plan.pagesPerQuery * queries : null,
    fetched: 0,
    failed: 0,
    stoppedSeries: {},
  };

  const series = async (index: number) => {
    const name = `s${index}`;
    for (let query = 0; query < queries; query++) {
      for (let page = 1; page <= plan.pagesPerQuery; page++) {
        const outcome = await scheduler.request({ series: name, path: SEARCH_PATH }, (signal) =>
          client.search({ q: `bench ${name} query ${query}`, page, count: 10 }, { signal }),
        );
        if (outcome.ok) tally.fetched += 1;
        else if (outcome.kind === 'failed') tally.failed += 1;
        else {
          tally.stoppedSeries[outcome.reason] = (tally.stoppedSeries[outcome.reason] ?? 0) + 1;
          return;
        }
      }
    }
  };

  await Promise.all(Array.from({ length: plan.series }, (_, i) => series(i)));
  return tally;
}

type AdaptEvent = Extract<SchedulerEvent, { type: 'adapt' }>;

export interface Recording {
  /** Attempts sent, and 2xx / 429 / other answers, per second of the run (by the second they happened in). */
  perSecond: { sent: number[]; ok: number[]; rateLimited: number[]; other: number[] };
  /**
   * The longest time in which nothing was sent, up to the end of the window: at these rates anything over a second
   * or two means the scheduler stopped sending without stopping the run.
   */
  longestSilence: { seconds: number; fromSecond: number };
  /** [seconds since start, rate, concurrency, reason], rounded for reading. */
  adapt: [number, number, number, AdaptEvent['reason']][];
  cuts: number;
  raises: number;
  /** Pauses the scheduler announced; they can overlap, so `requestedMs` may exceed `stats().rateLimitedWaitMs`. */
  pauses: { count: number; requestedMs: number; longestMs: number };
  retries: { rateLimited: number; transient: number };
  /** Largest credits spent (and spent + reserved) seen at any event: a budget must hold at every moment, not only at the end. */
  maxSpent: number;
  maxCommitted: number;
}

/** Listens to a scheduler's events from now on; the clock is the system clock the scheduler uses too. */
export function record(scheduler: Scheduler): { recording: Recording; startedAt: number; windowEnded(): void; stop(): void } {
  const startedAt = performance.now();
  const recording: Recording = {
    perSecond: { sent: [], ok: [], rateLimited: [], other: [] },
    longestSilence: { seconds: 0, fromSecond: 0 },
    adapt: [],
    cuts: 0,
    raises: 0,
    pauses: { count: 0, requestedMs: 0, longestMs: 0 },
    retries: { rateLimited: 0, transient: 0 },
    maxSpent: 0,
    maxCommitted: 0,
  };
  const bump = (list: number[], second: number) => {
    while (list.length <= second) list.push(0);
    list[second] = (list[second] ?? 0) + 1;
  };
  const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;
  let lastSentAt = 0;
  let windowOpen = true;
  const silence = (until: number) => {
    if (windowOpen && until - lastSentAt > recording.longestSilence.seconds) {
      recording.longestSilence = { seconds: round(until - lastSentAt, 2), fromSecond: round(lastSentAt, 2) };
    }
  };

  const stop = scheduler.on((event) => {
    const elapsed = (performance.now() - startedAt) / 1000;
    const second = Math.floor(elapsed);
    switch (event.type) {
      case 'request':
        bump(recording.perSecond.sent, second);
        silence(elapsed);
        lastSentAt = elapsed;
        break;
      case 'response': {
        const status = typeof event.status === 'number' ? event.status : 0;
        if (status >= 200 && status < 300) bump(recording.perSecond.ok, second);
        else if (status === 429) bump(recording.perSecond.rateLimited, second);
        else bump(recording.perSecond.other, second);
        break;
      }
      case 'adapt':
        recording.adapt.push([round(elapsed, 2), round(event.rate, 2), event.concurrency, event.reason]);
        if (event.reason === 'rate_limited') recording.cuts += 1;
        else if (event.reason === 'sustained_success') recording.raises += 1;
        break;
      case 'pause':
        recording.pauses.count += 1;
        recording.pauses.requestedMs += event.ms;
        recording.pauses.longestMs = Math.max(recording.pauses.longestMs, event.ms);
        break;
      case 'retry':
        if (event.reason === 'rate_limited') recording.retries.rateLimited += 1;
        else recording.retries.transient += 1;
        break;
      default:
        break;
    }
    const credits = scheduler.stats().credits;
    recording.maxSpent = Math.max(recording.maxSpent, credits.spent);
    recording.maxCommitted = Math.max(recording.maxCommitted, credits.spent + credits.reserved);
  });
  return {
    recording,
    startedAt,
    windowEnded() {
      silence((performance.now() - startedAt) / 1000);
      windowOpen = false;
    },
    stop,
  };
}
