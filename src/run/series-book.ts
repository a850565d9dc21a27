import type { Series } from '../pipeline/page.ts';
import type { SeriesStates } from '../pipeline/context.ts';
import { COMPLETE_REASONS, type SeriesEnd, type SeriesEndReason } from '../sources/source.ts';
import type { RunStore } from '../state/interfaces.ts';
import type { SeriesIdentity } from '../state/series-identity.ts';
import { UnstorablePageError } from '../errors/unstorable-page-error.ts';

/**
 * What the committer knows of each series at work: its no-new streak, the pages it has committed in this
 * invocation, how it ended (an end waits until every page it handed on is committed), and whether another worker
 * took it over or a page of it could not be stored. A pageless end is recorded once its pages are committed, and the
 * series' stage state let go.
 */
export class SeriesBook {
  readonly #store: RunStore;
  readonly #runId: string;
  readonly #states: SeriesStates;
  readonly #noNew = new Map<string, number>();
  readonly #committed = new Map<string, number>();
  readonly #pendingEnds = new Map<string, { series: Series; end: SeriesEnd }>();
  /** Series another worker took over (a distributed run): their pages here are dropped. */
  readonly #lost = new Set<string>();
  /** Series a page of which a database refused: they ask for no more pages, and end as failed. */
  readonly #refused = new Map<string, UnstorablePageError>();

  constructor(store: RunStore, runId: string, states: SeriesStates) {
    this.#store = store;
    this.#runId = runId;
    this.#states = states;
  }

  /** The series' no-new streak once a page with `fresh` new items is counted. */
  streak(seriesId: string, fresh: number): number {
    const streak = fresh === 0 ? (this.#noNew.get(seriesId) ?? 0) + 1 : 0;
    this.#noNew.set(seriesId, streak);
    return streak;
  }

  /** A series resumes with the no-new streak it had. */
  resume(seriesId: string, streak: number): void {
    this.#noNew.set(seriesId, streak);
  }

  isLost(seriesId: string): boolean {
    return this.#lost.has(seriesId);
  }

  lose(seriesId: string): void {
    this.#lost.add(seriesId);
  }

  refusal(seriesId: string): UnstorablePageError | undefined {
    return this.#refused.get(seriesId);
  }

  refuse(seriesId: string, error: UnstorablePageError): void {
    this.#refused.set(seriesId, error);
  }

  /** A page of the series is committed (or dropped as lost): an end waiting for it may be recorded now. */
  async pageDone(seriesId: string): Promise<void> {
    this.#committed.set(seriesId, (this.#committed.get(seriesId) ?? 0) + 1);
    await this.#settle(seriesId);
  }

  /** A series ended: ends carried by a page are already committed; the others are written once its pages are. */
  async ended(series: Series, end: SeriesEnd): Promise<void> {
    this.#pendingEnds.set(series.id, { series, end });
    await this.#settle(series.id);
  }

  /** Once a series has ended and every page it handed on is committed: record a pageless end, free its state. */
  async #settle(seriesId: string): Promise<void> {
    const pending = this.#pendingEnds.get(seriesId);
    if (!pending || (this.#committed.get(seriesId) ?? 0) < pending.end.pages) return;
    this.#pendingEnds.delete(seriesId);
    this.#states.release(seriesId);
    this.#committed.delete(seriesId);
    this.#noNew.delete(seriesId);
    const unstorable = this.#refused.get(seriesId);
    this.#refused.delete(seriesId);
    // This taking of the series is over, however it ended: taken again from the queue, it is this worker's again.
    const lost = this.#lost.delete(seriesId);
    // Another worker's (a page of it refused here): its end, whatever this taking of it said, is the other's to write.
    if (pending.end.reason === 'lost' || lost) return;
    // However it ended here (a page after the refused one may have ended it by a rule of its own), it failed.
    if (unstorable) await this.#writeEnd(pending.series, { reason: 'failed', pages: pending.end.pages, error: unstorable });
    else if (!COMPLETE_REASONS.has(pending.end.reason as SeriesEndReason)) await this.#writeEnd(pending.series, pending.end);
  }

  #writeEnd(series: Series, end: Exclude<SeriesEnd, { reason: 'lost' }>): Promise<void> {
    return this.#store.endSeries(this.#runId, seriesIdentity(series), {
      status: end.reason === 'stopped' ? 'stopped' : 'ended',
      reason: end.reason === 'stopped' ? end.stop : end.reason,
      // Null keeps the series' next page as its last page left it; a page that could not be stored is asked for again.
      nextPage: end.error instanceof UnstorablePageError ? end.error.retryFrom : null,
      error: end.error === undefined ? null : end.error instanceof Error ? end.error.message : String(end.error),
      errorKind: end.error === undefined ? null : ((end.error as { kind?: string }).kind ?? 'error'),
    });
  }
}

/** How the state store names a series. */
export function seriesIdentity(series: Series): SeriesIdentity {
  return { seriesId: series.id, endpoint: series.endpoint, query: series.query, country: series.country, lang: series.lang };
}
