/**
 * What a run needs of the place its state lives (DESIGN §4, §9): the seams behind which SQLite is the default and
 * PostgreSQL the second implementation. The runner, the committer and the sinks know these interfaces, not a driver.
 *
 * They are synchronous today: SQLite (better-sqlite3) commits a page in one synchronous transaction, and that is what
 * makes a page, its rows and its spend commit together. A network store's implementation will make the page commit
 * one asynchronous call (`commitPage`) carrying the same parts; the rest turns async with it.
 */

export interface RunRecord {
  runId: string;
  pipeline: string;
  status: string;
  startedAt: string;
  finishedAt: string | null;
  fingerprint: string;
  /** The data the fingerprint was taken of, to say what changed. */
  plan: Record<string, unknown>;
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
  /** Stage states, as committed with the series' last page. */
  state: Record<string, object> | null;
  error: string | null;
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
  has(scope: string, key: string): boolean;
  add(scope: string, key: string): void;
  sighting(sighting: Sighting): void;
}

/** Run statuses that mean "not finished": the next invocation resumes them by default. */
export const UNFINISHED = new Set(['running', 'interrupted', 'stopped']);

/** A run's hold on something only one run may have at a time (its state store, an output). */
export interface Lease {
  /** Never throws: a row it cannot remove is taken over by the next run. */
  release(): void;
}

/** Sink checkpoints, in whichever store the sink commits to. */
export interface SinkCheckpoints {
  get(sinkId: string): Checkpoint | undefined;
  set(sinkId: string, checkpoint: Checkpoint): void;
}

/** Dedupe keys and sightings of one run: held until the page commits, then written in its transaction. */
export interface SeenKeyStore {
  /** The keys as a dedupe stage sees them: run-scoped ones forgotten when the run finishes, or kept for good. */
  view(runScoped: boolean): SeenKeys;
  /** Writes what pages added since the last flush (inside the page's transaction). */
  flush(): void;
  /** A finished run's run-scoped keys go. */
  forgetRun(): void;
}

/** Totals of a run's spend ledger. */
export interface SpendTotals {
  spent: number;
  uncertain: number;
  requests: number;
  retries: number;
  byStatus: Record<string, number>;
  byEndpoint: Record<string, number>;
}

/** The run-state store: runs, series progress and stage state, the page journal, the spend ledger, leases. */
export interface StateStore {
  /** Where it lives (a file, or a database URL without its password). */
  readonly path: string;
  /** Runs `fn` as one transaction of the store; the returned function runs it. */
  transaction<T>(fn: () => T): () => T;
  /** One run of a pipeline per store at a time. */
  lease(pipeline: string): Lease;
  /** Checkpoints of the sinks that keep theirs in the state store (files). */
  readonly checkpoints: SinkCheckpoints;
  /** Dedupe keys and sightings for a run. */
  seenKeys(runId: string): SeenKeyStore;

  startRun(run: { runId: string; pipeline: string; startedAt: string; fingerprint: string; plan: unknown; budget: number | null }): void;
  reopenRun(runId: string, budget: number | null): void;
  finishRun(runId: string, status: string, finishedAt: string, summary: unknown, error?: string): void;
  latestRun(pipeline: string): RunRecord | undefined;
  runs(pipeline: string): RunRecord[];
  /** Abandons an unfinished run (`fresh`): its journal and series go; its spend stays (it was paid). */
  abandonRun(runId: string, at: string): void;

  /** The journal's next sequence number (taken), and the current one. */
  nextSeq(): number;
  currentSeq(): number;
  progress(runId: string, seriesId: string): SeriesProgress | undefined;
  /** A page's series progress, in the page's transaction. */
  commitSeries(
    runId: string,
    series: SeriesIdentity,
    page: { status: 'active' | 'ended'; reason: string | null; nextPage: number; served: number; written: number; duplicates: number; digest: string; noNew: number; cursor: string | null; state: string | null },
  ): void;
  /** An end that came without a page: the budget, a failure, a 403, or the run's stop. */
  endSeries(runId: string, series: SeriesIdentity, end: { status: 'ended' | 'stopped'; reason: string; nextPage: number | null; error: string | null; errorKind: string | null }): void;
  seriesTotals(runId: string): { pages: number; served: number; written: number; duplicates: number };
  seriesEnds(runId: string): { status: string; reason: string | null; n: number }[];
  failedKinds(runId: string): Record<string, number>;

  journal(entry: Omit<JournalEntry, 'meta' | 'output'> & { meta: string; output: string; raw: string | null }): void;
  /** Journal entries after `seq`, in order. */
  journalAfter(seq: number): Iterable<JournalEntry>;
  /** Journal entries every sink holds are no longer needed (unless the journal is kept). */
  prune(heldByAll: number): void;

  spend(row: SpendRow): void;
  spendOf(runId: string): SpendTotals;

  /** Where a sink stood when a run began, so that an abandoned run's output can be taken back. */
  recordSinkStart(runId: string, sinkId: string, seq: number, bytes: number | null): void;
  sinkStarts(runId: string): Map<string, { seq: number; bytes: number | null }>;
}
