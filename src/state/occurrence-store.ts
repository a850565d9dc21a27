/**
 * What became of a scheduled occurrence (docs/schedules.md): `claimed` by a worker that has not said more yet (one
 * that died before its run began stays so); `started` a run, or `resumed` the pipeline's unfinished one; `skipped`,
 * due while the pipeline's run was still at work; `missed`, due while no worker was up (and not caught up); `failed`
 * to start a run (the note says why).
 */
export type OccurrenceOutcome = 'claimed' | 'started' | 'resumed' | 'skipped' | 'missed' | 'failed';

/**
 * How far a claim's due time may lie after the store's clock (docs/schedules.md#clocks): clocks kept by NTP are
 * milliseconds apart, and a worker wakes at an occurrence by its own; one further ahead is refused, so that a worker
 * whose clock runs ahead never claims (and runs) occurrences before they are due.
 */
export const CLAIM_AHEAD_TOLERANCE_MS = 2_000;

/** How a claim went, with the store's clock as it read it (milliseconds since the epoch). */
export interface OccurrenceClaim {
  /**
   * `won`: the row is the caller's; `taken`: another's (a claim is never taken over); `ahead`: refused, nothing
   * written: its due time is more than CLAIM_AHEAD_TOLERANCE_MS after the store's clock (the claimant's runs ahead).
   */
  result: 'won' | 'taken' | 'ahead';
  storeTime: number;
}

/** A scheduled occurrence of a pipeline, as its claim records it: one row per (pipeline, due time), whoever claimed it. */
export interface OccurrenceRecord {
  pipeline: string;
  /** When it was due, as the schedule computes it (ISO 8601, UTC): the claim's key. */
  dueAt: string;
  outcome: OccurrenceOutcome;
  /** The run it started or resumed. */
  runId: string | null;
  /** The worker that claimed it. */
  worker: string | null;
  /** When it was claimed, by the store's clock (docs/schedules.md#clocks). */
  claimedAt: string;
  note: string | null;
}

/** A claim of an occurrence: whose, and what became of it so far. */
export interface OccurrenceClaimRequest {
  pipeline: string;
  dueAt: string;
  outcome: OccurrenceOutcome;
  worker: string;
  note?: string | null;
}

/** Which of a pipeline's occurrences: the latest (at most `limit`, due by `dueBy`), those of run `runId`, or the one due at `dueAt`. */
export interface OccurrenceQuery {
  limit?: number;
  dueBy?: string;
  runId?: string;
  dueAt?: string;
}

/** The state store's scheduled occurrences and its clock (docs/design.md#schedules). */
export interface OccurrenceStore {
  /**
   * Claims a scheduled occurrence (docs/design.md#schedules): `won` for the one caller whose row it is, `taken` for
   * every other, whatever the number of workers; a claim is never taken over. Never ahead of the store's clock: an
   * occurrence due more than CLAIM_AHEAD_TOLERANCE_MS after it is refused (`ahead`), nothing written.
   */
  claimOccurrence(claim: OccurrenceClaimRequest): Promise<OccurrenceClaim>;
  /**
   * The store's clock, milliseconds since the epoch (docs/schedules.md#clocks): PostgreSQL's now(); a SQLite store's,
   * this machine's clock as the store reads it. What claims are measured against, and what a worker's schedule keeps.
   */
  storeClock(): Promise<number>;
  /** What became of a claimed occurrence: its outcome, and the run and note when given (else they stay). */
  settleOccurrence(pipeline: string, dueAt: string, settled: { outcome: OccurrenceOutcome; runId?: string | null; note?: string | null }): Promise<void>;
  /**
   * The pipeline's occurrences, the latest first (at most `limit`; with `dueBy`, those due at or before it only); or
   * those that took run `runId`; or the one due at `dueAt`.
   */
  occurrences(pipeline: string, options?: OccurrenceQuery): Promise<OccurrenceRecord[]>;
  /**
   * Forgets the pipeline's oldest occurrences that took no run (skipped, missed, failed), keeping the latest `keep` of
   * them: a schedule of seconds would otherwise grow the table without end. The ones with runs stay with their runs.
   */
  pruneOccurrences(pipeline: string, keep: number): Promise<void>;
}
