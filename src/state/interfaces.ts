/**
 * What a run needs of the place its state lives (docs/design.md#the-state-store): the seams behind which SQLite is the
 * default and PostgreSQL the second implementation. The runner, the committer and the sinks know these interfaces, not
 * a driver.
 *
 * The store is made of roles, each its own interface and, in each implementation, its own module: runs and pages
 * (`RunStore`, here: runs, series, the journal, a page's commit, where sinks began), notifications
 * (`notification-store.ts`), scheduled occurrences and the store's clock (`occurrence-store.ts`), spend
 * (`spend-store.ts`), what keys learned of the server's limits (`limit-store.ts`), and keys' allowances
 * (`allowance-store.ts`). `StateStore` is all of them, as a run opens it; the modules that need one role take only it.
 *
 * Every call is asynchronous, as a network store needs; a page commits in one call (`commitPage`) that carries all it
 * writes as data, so that any store can write it in one transaction (SQLite's on a thread of its own).
 */
import type { FileAppend, SinkRows } from '../commits/page-writes.ts';
import type { AllowanceStore } from './allowance-store.ts';
import type { LimitStore } from './limit-store.ts';
import type { NotificationStore } from './notification-store.ts';
import type { OccurrenceStore } from './occurrence-store.ts';
import type { SeriesIdentity } from './series-identity.ts';
import type { SpendRow, SpendStore } from './spend-store.ts';

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

/**
 * Run statuses that mean "not finished": the next invocation resumes them by default (`allowance`: in the keys' next
 * period, page-exact; in the same one it sends nothing and says so).
 */
export const UNFINISHED = new Set(['running', 'interrupted', 'stopped', 'allowance']);
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
  /**
   * The bytes of the file sinks (`FileAppend`), which the store appends just before the transaction and whose new
   * lengths it records in it as their checkpoints (docs/design.md#the-commit-contract).
   */
  appends?: readonly FileAppend[];
  /** Checkpoints recorded in the transaction as they are given (with those of `appends`). */
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

/** A pipeline's runs, as the store records them. */
export interface RunRecords {
  startRun(run: { runId: string; pipeline: string; startedAt: string; fingerprint: string; plan: unknown; budget: number | null; terms?: unknown }): Promise<void>;
  /** The run goes on in a new invocation, under `budget` and, when given, `terms` (a resume may change some of them). */
  reopenRun(runId: string, budget: number | null, terms?: unknown): Promise<void>;
  finishRun(runId: string, status: string, finishedAt: string, summary: unknown, error?: string): Promise<void>;
  latestRun(pipeline: string): Promise<RunRecord | undefined>;
  runs(pipeline: string): Promise<RunRecord[]>;
  /** Abandons an unfinished run (`fresh`): its journal and series go; its spend stays (it was paid). */
  abandonRun(runId: string, at: string): Promise<void>;
}

/**
 * Runs and pages: the runs, their series' progress and stage state, the page journal and a page's commit, where each
 * sink began, the lease, the sinks' checkpoints kept in the store, and the dedupe keys.
 */
export interface RunStore extends RunRecords {
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

  /** The journal's current sequence number (the last page committed). */
  currentSeq(): Promise<number>;
  progress(runId: string, seriesId: string): Promise<SeriesProgress | undefined>;
  /**
   * Commits a page: its files' bytes appended, then everything in `commit`, its sinks' rows included, in one
   * transaction. Resolves once it is committed, to the length of each file of `appends`, in their order.
   */
  commitPage(commit: PageCommit): Promise<readonly number[]>;
  /**
   * Whether pages may be handed to `commitPage` before the one before them has committed: the store then commits them
   * in the order given — those waiting sharing a transaction (each still whole), and a page after one that failed
   * failing with it (SQLite, on its commit thread); or a worker's page statements sent down one pipelined connection,
   * where a page behind one of its series that failed is refused by the fence (PostgreSQL behind a fence). Otherwise
   * each is handed over once the one before has committed, so that a page whose values the database refused can be
   * committed without its rows first (PostgreSQL alone).
   */
  readonly queuesCommits: boolean;
  /**
   * Lets go of what the store runs of its own to commit pages, once the pages handed to it are committed (SQLite: its
   * commit thread; a later page starts it again). The database itself is the run's, closed with it.
   */
  close(): Promise<void>;
  endSeries(runId: string, series: SeriesIdentity, end: SeriesEndRecord): Promise<void>;
  seriesTotals(runId: string): Promise<SeriesTotals>;
  seriesEnds(runId: string): Promise<{ status: string; reason: string | null; n: number }[]>;
  /**
   * Where each of `seriesIds` stands in the run (a series the run never reached has no row): asked a slice of the plan
   * at a time when a run closes, to record each series' outcome beside its rows (`run/record-outcomes.ts`).
   */
  seriesStatuses(runId: string, seriesIds: readonly string[]): Promise<SeriesStatus[]>;
  /**
   * The series the run reached, where each stands, in the order of their ids: `limit` of them after the id `after`
   * ('' for the first). A run's close reads them so, a few statements in all, where the run reached a small part of
   * its plan (`run/record-outcomes.ts`).
   */
  reachedStatuses(runId: string, after: string, limit: number): Promise<SeriesStatus[]>;
  /**
   * The progress of each of `seriesIds` the run reached, as `progress` gives one, in one read: asked a slice of the
   * plan at a time when a run closes, to record the tracked domains' ranks beside the rows (`run/record-tracked.ts`).
   */
  seriesProgresses(runId: string, seriesIds: readonly string[]): Promise<SeriesProgress[]>;
  failedKinds(runId: string): Promise<Record<string, number>>;

  /** Journal entries after `seq`, in order. */
  journalAfter(seq: number): AsyncIterable<JournalEntry>;
  /** Journal entries every sink holds are no longer needed (unless the journal is kept). */
  prune(heldByAll: number): Promise<void>;

  /** Where each sink stood when a run began, so that an abandoned run's output can be taken back. */
  recordSinkStarts(runId: string, starts: readonly { sinkId: string; seq: number; bytes: number | null }[]): Promise<void>;
  sinkStarts(runId: string): Promise<Map<string, { seq: number; bytes: number | null }>>;
}

/** The run-state store, every role of it: what a run opens and hands around. */
export interface StateStore extends RunStore, NotificationStore, OccurrenceStore, SpendStore, LimitStore, AllowanceStore {}
