/**
 * What a run needs of the place its state lives (docs/design.md#the-state-store): the seams behind which SQLite is the
 * default and PostgreSQL the second implementation. The runner, the committer and the sinks know these interfaces, not
 * a driver.
 *
 * Every call is asynchronous, as a network store needs; a page commits in one call (`commitPage`) that carries all it
 * writes as data, so that any store can write it in one transaction. SQLite answers at once (better-sqlite3 is
 * synchronous), which is why its implementation is a thin wrapper of the synchronous tables in `sqlite/store.ts`.
 */
import type { SinkRows } from '../commits/page-writes.ts';

export interface RunRecord {
  runId: string;
  pipeline: string;
  status: string;
  startedAt: string;
  finishedAt: string | null;
  fingerprint: string;
  /** The data the fingerprint was taken of, to say what changed. */
  plan: Record<string, unknown>;
  /**
   * What else decides its money and rows (credit weights, stages, sinks, rate, budget: `run/run-terms.ts`), as its
   * latest planning recorded them; null for a run recorded before they were.
   */
  terms: Record<string, unknown> | null;
  budget: number | null;
  summary: Record<string, unknown> | null;
  error: string | null;
  invocations: number;
}

/** Where a series stands: what the next invocation needs to go on exactly where it stopped. */
export interface SeriesProgress {
  seriesId: string;
  /** `active`: under way or not reached; `ended`: by a rule, the budget, a failure or a 403; `stopped`: with the run. */
  status: 'active' | 'ended' | 'stopped';
  reason: string | null;
  nextPage: number | null;
  pages: number;
  /** Digest of the last committed page's items (the repeat rule). */
  digest: string | null;
  /** Pages in a row with nothing new (the no_new rule). */
  noNew: number;
  /** Cursor-paged series: what the next request sends. */
  cursor: Record<string, unknown> | null;
  /** Stage states, as committed with the series' last page (its last snapshot with the changes after it applied). */
  state: Record<string, object> | null;
  error: string | null;
}

/** How a series stands in a run: `status` and `reason` as in `SeriesProgress`. */
export interface SeriesStatus {
  seriesId: string;
  status: string;
  reason: string | null;
}

export interface SeriesIdentity {
  seriesId: string;
  endpoint: string;
  query: string;
  country: string;
  lang: string;
}

/** One journal entry: a committed page as the sinks get it. */
export interface JournalEntry {
  seq: number;
  runId: string;
  pageKey: string;
  seriesId: string;
  number: number;
  meta: Record<string, unknown>;
  output: unknown[];
}

export interface SpendRow {
  runId: string;
  at: string;
  seriesId: string;
  path: string;
  attempt: number;
  status: string;
  credits: number;
  uncertain: boolean;
  latencyMs: number;
  /** A 2xx whose page was never committed (its invocation failed, or another worker took its series): paid all the same. */
  uncommitted?: boolean;
}

/** What a sink holds: every journal page up to `seq`, and for a file, its committed length. */
export interface Checkpoint {
  seq: number;
  bytes: number | null;
}

/** Where an item was seen, for the `sightings` table. */
export interface Sighting {
  key: string;
  query: string;
  country: string;
  lang: string;
  page: number;
  position: number;
  rank: number | null;
  fetchedAt: string;
  /** Whether it was new to the dedupe scope there (else a duplicate of an earlier sighting). */
  first: boolean;
}

/** Keys a dedupe stage has seen in scopes wider than a series, and where items were seen. */
export interface SeenKeys {
  /** Which of a page's keys the scope has seen (committed, or added by pages not yet committed): one look-up per page. */
  seen(scope: string, keys: readonly string[]): Promise<ReadonlySet<string>>;
  add(scope: string, key: string): void;
  sighting(sighting: Sighting): void;
}

/** What pages added to the dedupe state since the last commit: written in the next page's transaction. */
export interface DedupeWrites {
  /** `runId` null: kept for good (persistent dedupe); else forgotten when that run finishes. */
  keys: { scope: string; key: string; runId: string | null }[];
  sightings: Sighting[];
}

/** Run statuses that mean "not finished": the next invocation resumes them by default. */
export const UNFINISHED = new Set(['running', 'interrupted', 'stopped']);
/** The same statuses as an SQL list, for the stores' statements (our own literals, never input). */
export const UNFINISHED_SQL = [...UNFINISHED].map((status) => `'${status}'`).join(', ');

/** A run's hold on something only one run may have at a time (its state store, an output). */
export interface Lease {
  /** Never fails: a hold it cannot give back is taken over by the next run. */
  release(): void | Promise<void>;
}

/** Sink checkpoints, in whichever store the sink commits to. */
export interface SinkCheckpoints {
  get(sinkId: string): Promise<Checkpoint | undefined>;
  set(sinkId: string, checkpoint: Checkpoint): Promise<void>;
}

/** Dedupe keys and sightings of one run: held until the page commits, then written in its transaction. */
export interface SeenKeyStore {
  /** The keys as a dedupe stage sees them: run-scoped ones forgotten when the run finishes, or kept for good. */
  view(runScoped: boolean): SeenKeys;
  /** Takes what pages added since the last call, for the next page's commit. */
  drain(): DedupeWrites;
  /**
   * What a `drain` took is settled: committed with its page (the store's tables answer for it now), or refused with
   * it. Until then its keys still count as seen: later pages go through dedupe while earlier ones are committing.
   */
  settled(writes: DedupeWrites): void;
  /** A finished run's run-scoped keys go. */
  forgetRun(): Promise<void>;
}

/** Totals of a run's spend ledger. */
export interface SpendTotals {
  spent: number;
  uncertain: number;
  /** Credits of answers whose pages were never committed (fetched again when the run resumes). */
  uncommitted: number;
  requests: number;
  retries: number;
  byStatus: Record<string, number>;
  byEndpoint: Record<string, number>;
}

/** A series' progress as a page leaves it. */
export interface PageProgress {
  status: 'active' | 'ended';
  reason: string | null;
  nextPage: number;
  served: number;
  written: number;
  duplicates: number;
  digest: string;
  noNew: number;
  cursor: string | null;
  state: StateWrite;
}

/**
 * How a page writes its series' stage states: a whole snapshot (which replaces the stored one and the changes after
 * it; null: none), or what the page changed, added after them (null: nothing).
 */
export type StateWrite = { kind: 'snapshot'; json: string | null } | { kind: 'changes'; json: string | null };

/** An end that came without a page: the budget, a failure, a 403, or the run's stop. */
export interface SeriesEndRecord {
  status: 'ended' | 'stopped';
  reason: string;
  /** Where a retry begins; null: where the series' last committed page left it. */
  nextPage: number | null;
  error: string | null;
  errorKind: string | null;
}

/** A journal entry as written: meta and items as JSON text. */
export type JournalWrite = Omit<JournalEntry, 'meta' | 'output'> & { meta: string; output: string; raw: string | null };

/** Everything a page commit writes, in one transaction of the state store (docs/design.md#one-transaction-per-page). */
export interface PageCommit {
  runId: string;
  /** The journal sequence number the page takes: the commit is refused if another writer took it first. */
  seq: number;
  series: SeriesIdentity;
  progress: PageProgress;
  /** Spend of the answers since the last commit (2xx rows wait for a page, so a page and its cost commit together). */
  spend: readonly SpendRow[];
  /** The journal entry, when a sink outside the transaction (or a kept journal) needs it. */
  journal: JournalWrite | null;
  /** Checkpoints of file sinks, whose bytes were written just before: the page's commit is what makes them count. */
  checkpoints: readonly { sinkId: string; checkpoint: Checkpoint }[];
  /**
   * The rows of the sinks on the store's own database, each with its checkpoint (at `seq`): written in the page's
   * transaction (docs/design.md#the-commit-contract).
   */
  rows: readonly SinkRows[];
  dedupe: DedupeWrites | null;
  /**
   * The page's dedupe keys are its rows' `dedupe_key`s, and must be claimed against other workers (a distributed run
   * with dedupe across series): a key another worker holds drops its row.
   */
  claimKeys?: boolean;
}

/**
 * A notification for one webhook (docs/notifications.md): of a run's end, or of a missed occurrence. Pending until a
 * process takes it for delivery (`sending`), then delivered or given up (or pending again, aborted).
 */
export interface NotificationRecord {
  runId: string;
  /** The run's invocation that ended: a run stopped and resumed ends again, and is told again. */
  invocation: number;
  /** Which webhook (a hash of its whole URL, which may carry a token). */
  webhook: string;
  pipeline: string;
  /** The webhook as shown: origin and path, never its query string. */
  target: string;
  /** The end it tells of: completed, budget, failed, stopped, interrupted. */
  event: string;
  status: 'pending' | 'sending' | 'delivered' | 'failed';
  attempts: number;
  error: string | null;
  /** The exact body to send, kept while pending (a delivery the process did not live to finish is sent again). */
  body: string | null;
  createdAt: string;
  updatedAt: string;
}

/** Which notification: a run's end, for one webhook. */
export type NotificationKey = Pick<NotificationRecord, 'runId' | 'invocation' | 'webhook'>;

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

/** A run's counts across its series, every invocation and worker's (the summary's `pages` and `items`). */
export interface SeriesTotals {
  pages: number;
  served: number;
  written: number;
  duplicates: number;
  /**
   * Items a stage removed that dedupe did not count (a filter of the user's): served − written − duplicates, by series,
   * none where a stage added items.
   */
  dropped: number;
}

/** The run-state store: runs, series progress and stage state, the page journal, the spend ledger, leases. */
export interface StateStore {
  /** Where it lives (a file, or a database URL without its password). */
  readonly path: string;
  /** Which database it is (`sqlite:<file>`, `postgres://host:port/db`): a sink on the same one commits in its transactions. */
  readonly database: string;
  /** One run of a pipeline per store at a time. */
  lease(pipeline: string): Promise<Lease>;
  /** Checkpoints of the sinks that keep theirs in the state store (files). */
  readonly checkpoints: SinkCheckpoints;
  /** Dedupe keys and sightings for a run. */
  seenKeys(runId: string): SeenKeyStore;

  startRun(run: { runId: string; pipeline: string; startedAt: string; fingerprint: string; plan: unknown; budget: number | null; terms?: unknown }): Promise<void>;
  /** The run goes on in a new invocation, under `budget` and, when given, `terms` (a resume may change some of them). */
  reopenRun(runId: string, budget: number | null, terms?: unknown): Promise<void>;
  finishRun(runId: string, status: string, finishedAt: string, summary: unknown, error?: string): Promise<void>;
  latestRun(pipeline: string): Promise<RunRecord | undefined>;
  runs(pipeline: string): Promise<RunRecord[]>;
  /** Abandons an unfinished run (`fresh`): its journal and series go; its spend stays (it was paid). */
  abandonRun(runId: string, at: string): Promise<void>;

  /** The journal's current sequence number (the last page committed). */
  currentSeq(): Promise<number>;
  progress(runId: string, seriesId: string): Promise<SeriesProgress | undefined>;
  /** Commits a page: everything in `commit`, its sinks' rows included, in one transaction. */
  commitPage(commit: PageCommit): Promise<void>;
  endSeries(runId: string, series: SeriesIdentity, end: SeriesEndRecord): Promise<void>;
  seriesTotals(runId: string): Promise<SeriesTotals>;
  seriesEnds(runId: string): Promise<{ status: string; reason: string | null; n: number }[]>;
  /**
   * Where each of `seriesIds` stands in the run (a series the run never reached has no row): asked a slice of the plan
   * at a time when a run closes, to record each series' outcome beside its rows (`run/record-outcomes.ts`).
   */
  seriesStatuses(runId: string, seriesIds: readonly string[]): Promise<SeriesStatus[]>;
  failedKinds(runId: string): Promise<Record<string, number>>;

  /** Journal entries after `seq`, in order. */
  journalAfter(seq: number): AsyncIterable<JournalEntry>;
  /** Journal entries every sink holds are no longer needed (unless the journal is kept). */
  prune(heldByAll: number): Promise<void>;

  /** Spend rows written on their own (answers with no page: failures, and those whose page never committed). */
  spend(rows: readonly SpendRow[]): Promise<void>;
  spendOf(runId: string): Promise<SpendTotals>;

  /** Where each sink stood when a run began, so that an abandoned run's output can be taken back. */
  recordSinkStarts(runId: string, starts: readonly { sinkId: string; seq: number; bytes: number | null }[]): Promise<void>;
  sinkStarts(runId: string): Promise<Map<string, { seq: number; bytes: number | null }>>;

  /**
   * The series of a run that failed, in order, at most `limit` of them: what a notification lists (the store keeps
   * each one's last error, redacted).
   */
  failedSeries(runId: string, limit: number): Promise<(SeriesIdentity & { errorKind: string | null; error: string | null })[]>;
  /**
   * Records a notification as pending, with the body it sends; false when it is recorded already (another worker
   * of the run claimed it: one sends it).
   */
  claimNotification(notification: Omit<NotificationRecord, 'status' | 'attempts' | 'error' | 'updatedAt'>): Promise<boolean>;
  /** How its delivery went: delivered or failed (the body goes), or still pending (aborted), with its attempts. */
  settleNotification(key: NotificationKey, outcome: { status: NotificationRecord['status']; attempts: number; error: string | null; at: string }): Promise<void>;
  /**
   * The pipeline's notifications still owed, oldest first, at most `limit`: pending (a process ended before it took
   * them, or its delivery was aborted), or `sending` since before `staleBefore` (taken by a process that did not live
   * to settle them within the longest a delivery takes).
   */
  pendingNotifications(pipeline: string, limit: number, staleBefore: string): Promise<NotificationRecord[]>;
  /**
   * Takes an owed notification for delivery by this process (docs/notifications.md#at-least-once-and-idempotency):
   * `sending` as of `at`, so that no other process's `pendingNotifications` hands it out while it is sent; false when it
   * is not owed (another took it first, or it was settled).
   */
  takeNotification(key: NotificationKey, at: string, staleBefore: string): Promise<boolean>;
  /**
   * Claims a scheduled occurrence (docs/design.md#schedules): `won` for the one caller whose row it is, `taken` for
   * every other, whatever the number of workers; a claim is never taken over. Never ahead of the store's clock: an
   * occurrence due more than CLAIM_AHEAD_TOLERANCE_MS after it is refused (`ahead`), nothing written.
   */
  claimOccurrence(claim: { pipeline: string; dueAt: string; outcome: OccurrenceOutcome; worker: string; note?: string | null }): Promise<OccurrenceClaim>;
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
  occurrences(pipeline: string, options?: { limit?: number; dueBy?: string; runId?: string; dueAt?: string }): Promise<OccurrenceRecord[]>;
  /**
   * Forgets the pipeline's oldest occurrences that took no run (skipped, missed, failed), keeping the latest `keep` of
   * them: a schedule of seconds would otherwise grow the table without end. The ones with runs stay with their runs.
   */
  pruneOccurrences(pipeline: string, keep: number): Promise<void>;
}
