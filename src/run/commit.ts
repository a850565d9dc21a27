import type { Page, Series } from '../pipeline/page.ts';
import type { Sink } from '../sinks/sink.ts';
import type { SeriesEnd, SeriesEndReason } from '../sources/source.ts';
import { toJson } from '../json.ts';
import type { PageCommit, SeenKeyStore, SharedTransaction, SpendRow, StateStore } from '../state/interfaces.ts';
import { crashPoint } from '../crash-points.ts';
import { SeriesLostError } from '../errors/series-lost-error.ts';
import { isRefusedValue, UnstorablePageError } from '../errors/unstorable-page-error.ts';
import { writingTo } from './output-error.ts';
import { paidNotCommitted, SpendLedger } from './spend-ledger.ts';
import { SeriesBook, seriesIdentity } from './series-book.ts';
import type { SeriesStates } from '../pipeline/context.ts';
import type { CommitThread } from '../state/sqlite/commit-thread.ts';

export interface CommitterOptions {
  store: StateStore;
  runId: string;
  sinks: readonly Sink<unknown>[];
  states: SeriesStates;
  /** Keep journal entries (with the raw answers) after every sink holds them. */
  keepJournal: boolean;
  /** Dedupe keys and sightings the page's processing added, written inside its transaction. */
  keys?: SeenKeyStore;
  /** Claim each page's dedupe keys against other workers (a distributed run whose dedupe looks across series). */
  claimKeys?: boolean;
  /** Where a SQLite store's page transactions run, when they can (`commitsOnThread`): else on this thread. */
  thread?: CommitThread | undefined;
}

/** Whether a run's page transactions can run on a commit thread: a SQLite store, and every sink inside them one of rows. */
export function commitsOnThread(store: StateStore, sinks: readonly Sink<unknown>[]): boolean {
  return store.database.startsWith('sqlite:') && sinks.every((sink) => sink.database !== store.database || sink.rows !== undefined);
}

type CommitResult = { new: number; end?: SeriesEndReason; lost?: true };

/**
 * Exactly once, page by page (docs/design.md#exactly-once). A page that came out of the stages commits in one
 * transaction of the state store: its series' progress and stage state, the spend of its request, its journal entry,
 * and the rows of every SQLite sink in the same file (on the commit thread, pages waiting there share one transaction,
 * each still whole). Pages commit in the order they came. Sinks elsewhere then take the committed page and record that
 * they hold it. After a crash, `replay` re-delivers from the journal the committed pages a sink lacks, without running
 * stages or sending a request.
 */
export function createCommitter({ store, runId, sinks, states, keepJournal, keys, claimKeys, thread }: CommitterOptions) {
  // Sinks on the state store's own database commit inside the page's transaction, and so do file sinks, whose
  // bytes are written just before it and whose checkpoint is recorded in it; the others take the page after it.
  const inside = sinks.filter((sink) => sink.database !== undefined && sink.database === store.database);
  const files = sinks.filter((sink) => !inside.includes(sink) && sink.stage !== undefined);
  const after = sinks.filter((sink) => !inside.includes(sink) && !files.includes(sink));
  // On the commit thread, CSV files are rendered and appended there too (`records`); other files here (`stage`).
  const recorded = thread ? files.filter((sink) => sink.records !== undefined) : [];
  const staged = files.filter((sink) => !recorded.includes(sink));
  // Sinks that take a page after its transaction may miss it in a crash: the journal keeps it for them until they hold it.
  const needsJournal = keepJournal || after.length > 0;
  const book = new SeriesBook(store, runId, states);
  const ledger = new SpendLedger(store);
  // Pages commit one at a time, so the journal's next number is known before the transaction that takes it.
  let seq: number | undefined;
  // Pages commit in the order they came, one after the other: each waits for the one before (and fails with it).
  let previousCommit: Promise<unknown> = Promise.resolve();

  // Whether the journal may hold entries every sink now has: pages journaled since the last prune, or a past run's.
  let unpruned = true;
  const prune = async () => {
    if (keepJournal || sinks.length === 0 || !unpruned) return;
    unpruned = false;
    await store.prune(Math.min(...sinks.map((sink) => sink.held())));
  };

  /**
   * The sinks inside the page's transaction write `page` in it, then `then` runs: SQLite's synchronously (its
   * transaction is), PostgreSQL's by adding their statements to the page's.
   */
  const writeInside = (page: Page<unknown>, pageSeq: number, tx: SharedTransaction, then: () => void): void | Promise<void> => {
    const writes = inside.map((sink) => sink.write(page, pageSeq, tx)).filter((write) => write instanceof Promise);
    return writes.length === 0 ? then() : Promise.all(writes).then(then);
  };

  /** What a page commits, taken now: its progress and stage state, spend, journal entry, dedupe keys, file bytes. */
  const prepare = (page: Page<unknown>, pageSeq: number) => {
    const id = page.series.id;
    const fresh = page.meta.dedupe?.new ?? page.items.length;
    const streak = book.streak(id, fresh);
    const end: SeriesEndReason | undefined =
      page.meta.end ?? (page.meta.noNewLimit !== undefined && streak >= page.meta.noNewLimit ? 'no_new' : undefined);
    const files = staged.map((sink) => ({ sink, staged: writingTo(sink.path, () => (sink.stage as NonNullable<Sink<unknown>['stage']>)(page, pageSeq)) }));
    const commit: PageCommit = {
      runId,
      seq: pageSeq,
      series: seriesIdentity(page.series),
      progress: {
        status: end ? 'ended' : 'active',
        reason: end ?? null,
        nextPage: page.number + 1,
        served: page.meta.served,
        written: page.items.length,
        duplicates: page.meta.dedupe?.duplicates ?? 0,
        digest: page.meta.digest ?? '',
        noNew: streak,
        cursor: page.meta.cursor ? toJson(page.meta.cursor) : null,
        // A series that ends here is never resumed: its stage state (ranks, keys) would only weigh on the file.
        state: states.write(id, end !== undefined),
      },
      spend: ledger.take(id),
      journal: needsJournal
        ? { seq: pageSeq, runId, pageKey: page.key, seriesId: id, number: page.number, meta: toJson({ ...page.meta, series: page.series }), output: toJson(page.items), raw: null }
        : null,
      checkpoints: files.map(({ sink, staged }) => ({ sinkId: sink.id, checkpoint: staged.checkpoint })),
      dedupe: keys ? keys.drain() : null,
      ...(claimKeys ? { claimKeys } : {}),
    };
    // On the commit thread, the sinks inside the transaction hand over their rows now (the page is theirs to read now),
    // and the CSV files their cells.
    const rows = thread ? inside.map((sink) => (sink.rows as NonNullable<Sink<unknown>['rows']>)(page, pageSeq)) : [];
    const records = recorded.map((sink) => (sink.records as NonNullable<Sink<unknown>['records']>)(page, pageSeq));
    // Set once the page's transaction is known to have committed: a page that fails before or in it is paid, not committed.
    const outcome = { transacted: false };
    return { id, fresh, end, files, commit, rows, records, outcome };
  };

  /** The page's transaction, then the sinks that take it after, once the pages before it are committed. */
  const commitPrepared = async (page: Page<unknown>, prepared: ReturnType<typeof prepare>, onThread: Promise<number[]> | undefined): Promise<CommitResult> => {
    const { id, fresh, end, files, commit, rows, records, outcome } = prepared;
    const pageSeq = commit.seq;
    // The length of each records' file once the page is committed (on the thread).
    let lengths: number[] = [];
    // A page of a series one of whose pages was refused: it commits emptied too (a retry fetches it again).
    const unstorable = book.refusal(id);
    if (unstorable && onThread === undefined) return commitRefused(page, prepared, unstorable.cause);
    try {
      if (onThread) lengths = await onThread;
      else {
        await writingTo(store.path, () =>
          store.commitPage(commit, (tx) => writeInside(page, pageSeq, tx, () => crashPoint('page-transaction'))),
        );
      }
    } catch (error) {
      // A value the database refused (the transaction rolled back, the number not taken): the page commits without it.
      if (onThread === undefined && isRefusedValue(error)) return commitRefused(page, prepared, error);
      // Where the journal stands is no longer known (the commit may or may not have taken its number).
      seq = undefined;
      if (!(error instanceof SeriesLostError)) throw error;
      if (commit.dedupe) keys?.settled(commit.dedupe);
      for (const file of files) file.staged.abandoned?.();
      // Another worker has the series: this page (and the series' next ones here) are dropped, not a failure. Its
      // answer was paid all the same.
      ledger.paidNotCommitted(commit.spend);
      book.lose(id);
      await book.pageDone(id);
      return { new: 0, lost: true };
    }
    outcome.transacted = true;
    if (commit.dedupe) keys?.settled(commit.dedupe);
    // Marked once committed, not when taken: a page before it may prune meanwhile, and must not clear the mark.
    if (commit.journal) unpruned = true;
    for (const sinkRows of rows) sinkRows.committed();
    records.forEach((sinkRecords, index) => sinkRecords.committed(lengths[index] as number));
    for (const file of files) file.staged.committed();
    crashPoint('after-commit');
    for (const [index, sink] of after.entries()) {
      if (index > 0 || inside.length > 0) crashPoint('between-sinks');
      await writingTo(sink.path, () => sink.write(page, pageSeq));
    }
    await prune();
    await book.pageDone(id);
    return end ? { new: fresh, end } : { new: fresh };
  };

  /**
   * A page whose values a database refused, even after what is replaced to make every value storable, and the pages
   * of its series after it: each commits without its rows in the sinks inside the transaction (their checkpoints move
   * on; a file that holds it keeps it), without its dedupe keys and stage state, its answer marked paid and not
   * committed. The series asks for no more pages and ends as failed with the reason (exit 5); a retry of it begins
   * at the refused page. The run goes on. If even the emptied page is refused, the run fails with the first error.
   */
  const commitRefused = async (page: Page<unknown>, prepared: ReturnType<typeof prepare>, error: unknown): Promise<CommitResult> => {
    const { id, files, commit, outcome } = prepared;
    // Paged by number, a retry asks for the refused page again; by cursor it goes on after it (the cursor that led
    // there is not kept).
    const retryFrom = commit.progress.cursor === null ? page.number : null;
    const unstorable =
      book.refusal(id) ??
      new UnstorablePageError(
        { seriesId: id, page: page.number, retryFrom },
        `page ${page.number} of series ${id} could not be stored (${error instanceof Error ? error.message : String(error)}): its rows were left out of ${inside.map((sink) => sink.path).join(', ') || 'the state store'} and the series stopped there; \`--resume\` retries it ${retryFrom === null ? 'from the page after it' : 'from that page'} once the database takes it`,
        error,
      );
    const emptied: PageCommit = {
      ...commit,
      // Not ended by this page, whatever its own rule said: the series ends as failed once its pages are committed.
      // No digest: the page a retry asks for again must not be taken for a repeat of this one.
      progress: { ...commit.progress, status: 'active', reason: null, digest: '', written: 0, duplicates: 0, state: { kind: 'changes', json: null } },
      spend: paidNotCommitted(commit.spend),
      journal: null,
      dedupe: null,
    };
    delete emptied.claimKeys;
    try {
      await writingTo(store.path, () =>
        store.commitPage(emptied, (tx) => writeInside({ ...page, items: [] }, commit.seq, tx, () => undefined)),
      );
    } catch {
      seq = undefined;
      throw error;
    } finally {
      if (commit.dedupe) keys?.settled(commit.dedupe);
    }
    outcome.transacted = true;
    book.refuse(id, unstorable);
    for (const file of files) file.staged.committed();
    await book.pageDone(id);
    return { new: 0 };
  };

  const start = async (): Promise<void> => {
    seq ??= await store.currentSeq();
  };

  const commit = (page: Page<unknown>): Promise<CommitResult> => {
    if (seq === undefined) return start().then(() => commit(page));
    let prepared: ReturnType<typeof prepare>;
    try {
      prepared = prepare(page, (seq += 1));
    } catch (error) {
      seq = undefined;
      return Promise.reject(error);
    }
    // On the commit thread the page goes at once (the thread commits in order, and the journal's number refuses a page
    // whose predecessor failed): pages that wait there commit together. What follows each commit keeps to the chain.
    const onThread = thread ? writingTo(store.path, () => thread.commit(prepared.commit, prepared.rows, prepared.records)) : undefined;
    onThread?.catch(() => undefined);
    const done = previousCommit
      .then(() => commitPrepared(page, prepared, onThread))
      .catch(async (error: unknown) => {
        // Failed before its transaction, in it, or with a page before it: its answer is paid and not committed. (On
        // the thread, a page whose predecessor failed after its own transaction may still have committed.)
        const transacted = prepared.outcome.transacted || (onThread !== undefined && (await onThread.then(() => true, () => false)));
        if (!transacted) ledger.paidNotCommitted(prepared.commit.spend);
        throw error;
      });
    previousCommit = done;
    return done;
  };

  return {
    /** Whether another worker took the series over (a distributed run). */
    lost: (seriesId: string) => book.isLost(seriesId),

    /** Why the series may ask for no more pages: a page of it could not be stored (`commitRefused`). */
    refused: (seriesId: string): UnstorablePageError | undefined => book.refusal(seriesId),

    /** A series resumes with the no-new streak it had. */
    resumeSeries(seriesId: string, streak: number): void {
      book.resume(seriesId, streak);
    },

    /** Spend of a request (`SpendLedger.record`). */
    spend: (row: SpendRow): Promise<void> => ledger.record(row),

    /** The journal's number now: pages can then be handed over without waiting (`commit`). */
    start,

    /**
     * Commits a page that came out of the stages; resolves to what the source needs for its no_new rule. What the
     * page takes with it — its series' stage state, the dedupe keys and spend so far, its journal number, a file
     * sink's bytes — is taken before this returns, so the next page may go through the stages while this one commits
     * (after `start`); the commit itself waits for the pages before it.
     */
    commit,

    /** A series ended: ends carried by a page are already committed; the others are written once its pages are. */
    seriesEnded: (series: Series, end: SeriesEnd): Promise<void> => book.ended(series, end),

    /** Re-delivers to each sink the committed pages it lacks (after a crash between a commit and a sink). */
    async replay(): Promise<number> {
      let delivered = 0;
      for (const sink of sinks) {
        // A worker's own file holds its worker's pages: the journal's others are other workers'.
        if (sink.perWorker) continue;
        const held = sink.held();
        for await (const entry of store.journalAfter(held)) {
          const { series, ...meta } = entry.meta as unknown as { series: Series } & Page['meta'];
          await writingTo(sink.path, () => sink.write({ key: entry.pageKey, series, number: entry.number, items: entry.output, meta }, entry.seq));
          delivered += 1;
        }
      }
      await prune();
      return delivered;
    },

    /** Writes the spend not yet written, that of answers whose pages never committed included (`SpendLedger.flush`). */
    flush: (): Promise<void> => ledger.flush(),
  };
}

export type Committer = ReturnType<typeof createCommitter>;
