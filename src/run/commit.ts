import type { Page, Series } from '../pipeline/page.ts';
import type { Sink } from '../sinks/sink.ts';
import { deliverAlone, participants } from './participants.ts';
import type { SeriesEnd, SeriesEndReason } from '../sources/source.ts';
import { toJson } from '../json.ts';
import type { PageCommit, SeenKeyStore, StateStore } from '../state/interfaces.ts';
import type { SpendRow } from '../state/spend-store.ts';
import { crashPoint } from '../crash-points.ts';
import { SeriesLostError } from '../errors/series-lost-error.ts';
import { isRefusedValue, UnstorablePageError } from '../errors/unstorable-page-error.ts';
import { writingTo } from './output-error.ts';
import { paidNotCommitted, SpendLedger } from './spend-ledger.ts';
import { SeriesBook, seriesIdentity } from './series-book.ts';
import type { SeriesStates } from '../pipeline/context.ts';
import type { Tracking } from '../pipeline/tracked-domains.ts';
import { trackPage } from './track-page.ts';

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
  /** The pipeline's tracked domains: their ranks kept in each series' state, and depth until found decided here. */
  tracking?: Tracking | undefined;
}

type CommitResult = { new: number; end?: SeriesEndReason; lost?: true };

/** A page's commit as taken when it left the stages (`PageCommitter.#prepare`). */
interface PreparedPage {
  readonly page: Page<unknown>;
  /** Without its rows once handed over (`commit`). */
  commit: PageCommit;
  /** New items, for the source's no_new rule. */
  readonly fresh: number;
  readonly end: SeriesEndReason | undefined;
  /** Set once the page's transaction is known to have committed: a page that fails before or in it is paid, not committed. */
  transacted: boolean;
}

/**
 * Exactly once, page by page (docs/design.md#exactly-once). A page that came out of the stages commits in one
 * transaction of the state store: its series' progress and stage state, the spend of its request, its journal entry,
 * and the rows of every sink on the store's database; where it commits is the store's business (SQLite's on a thread
 * of its own, pages waiting there sharing one transaction, each still whole). Pages commit in the order they came.
 * Each sink takes part in one of three ways (docs/design.md#the-commit-contract, `participants`): inside the
 * transaction, before it (files: their bytes handed to the store, which appends them first), after it. After a
 * crash, `replay` re-delivers from the journal the committed pages a sink lacks, without running stages or sending a
 * request.
 */
export class PageCommitter {
  readonly #store: StateStore;
  readonly #runId: string;
  readonly #sinks: readonly Sink<unknown>[];
  readonly #states: SeriesStates;
  readonly #keepJournal: boolean;
  readonly #keys: SeenKeyStore | undefined;
  readonly #claimKeys: boolean;
  readonly #tracking: Tracking | undefined;
  readonly #taking: ReturnType<typeof participants>;
  /** Sinks that take a page after its transaction may miss it in a crash: the journal keeps it for them until they hold it. */
  readonly #needsJournal: boolean;
  readonly #book: SeriesBook;
  readonly #ledger: SpendLedger;
  /** The journal's next number is known before the transaction that takes it: pages commit one at a time. */
  #seq: number | undefined;
  /** Pages commit in the order they came, one after the other: each waits for the one before (and fails with it). */
  #previousCommit: Promise<unknown> = Promise.resolve();
  /** Whether the journal may hold entries every sink now has: pages journaled since the last prune, or a past run's. */
  #unpruned = true;

  constructor({ store, runId, sinks, states, keepJournal, keys, claimKeys, tracking }: CommitterOptions) {
    this.#store = store;
    this.#runId = runId;
    this.#sinks = sinks;
    this.#states = states;
    this.#keepJournal = keepJournal;
    this.#keys = keys;
    this.#claimKeys = claimKeys === true;
    this.#tracking = tracking;
    this.#taking = participants(sinks, store.database);
    this.#needsJournal = keepJournal || this.#taking.after.length > 0;
    this.#book = new SeriesBook(store, runId, states);
    this.#ledger = new SpendLedger(store);
  }

  /** Whether another worker took the series over (a distributed run). */
  lost(seriesId: string): boolean {
    return this.#book.isLost(seriesId);
  }

  /** Why the series may ask for no more pages: a page of it could not be stored (`#commitRefused`). */
  refused(seriesId: string): UnstorablePageError | undefined {
    return this.#book.refusal(seriesId);
  }

  /** A series resumes with the no-new streak it had. */
  resumeSeries(seriesId: string, streak: number): void {
    this.#book.resume(seriesId, streak);
  }

  /** Spend of a request for `page` of its series, where told (`SpendLedger.record`). */
  spend(row: SpendRow, page?: number): Promise<void> {
    return this.#ledger.record(row, page);
  }

  /** The journal's number now: pages can then be handed over without waiting (`commit`). */
  async start(): Promise<void> {
    this.#seq ??= await this.#store.currentSeq();
  }

  /**
   * Commits a page that came out of the stages; resolves to what the source needs for its no_new rule. What the page
   * takes with it — its series' stage state, the dedupe keys and spend so far, its journal number, its rows, a file
   * sink's bytes — is taken before this returns, so the next page may go through the stages while this one commits
   * (after `start`); the commit itself waits for the pages before it.
   */
  commit(page: Page<unknown>): Promise<CommitResult> {
    if (this.#seq === undefined) return this.start().then(() => this.commit(page));
    let prepared: PreparedPage;
    try {
      prepared = this.#prepare(page, (this.#seq += 1));
    } catch (error) {
      this.#seq = undefined;
      return Promise.reject(error);
    }
    // A store that queues its commits takes the page at once (it commits in order, and the journal's number or a
    // worker's fence refuses a page whose predecessor in its series failed): pages that wait there commit together, or
    // go down a pipelined connection. What follows each commit keeps to the chain. A page of a series one of whose
    // pages was refused is not handed over: it commits emptied, in the chain.
    const handedOver = this.#store.queuesCommits && !this.#book.refusal(page.series.id) ? this.#handOver(prepared.commit) : undefined;
    handedOver?.catch(() => undefined);
    // Handed over, its rows are the store's (SQLite's commit thread has a copy of them already): held here until the
    // page commits, each page's rows — every item's `raw` as JSON text — outlived the young generation and went to the
    // old one (docs/benchmarks.md#memory). Nothing here reads them again: a refused page makes its rows anew.
    if (handedOver) prepared.commit = { ...prepared.commit, rows: [] };
    const done = this.#previousCommit
      .then(() => this.#commitPrepared(prepared, handedOver))
      .catch(async (error: unknown) => {
        // Failed before its transaction, in it, or with a page before it: its answer is paid and not committed. (Handed
        // over at once, a page whose predecessor failed after its own transaction may still have committed.)
        const transacted = prepared.transacted || (handedOver !== undefined && (await handedOver.then(() => true, () => false)));
        if (!transacted) this.#ledger.paidNotCommitted(prepared.commit.spend);
        throw error;
      });
    this.#previousCommit = done;
    return done;
  }

  /** A series ended: ends carried by a page are already committed; the others are written once its pages are. */
  seriesEnded(series: Series, end: SeriesEnd): Promise<void> {
    return this.#book.ended(series, end);
  }

  /**
   * Lets go of what the store runs of its own to commit pages (SQLite: its commit thread), once the pages handed to it
   * are committed: after the last page, and however the run ends.
   */
  close(): Promise<void> {
    return this.#store.close();
  }

  /** Re-delivers to each sink the committed pages it lacks (after a crash between a commit and a sink). */
  async replay(): Promise<number> {
    let delivered = 0;
    for (const sink of this.#sinks) {
      // A worker's own file holds its worker's pages: the journal's others are other workers'.
      if (sink.perWorker) continue;
      for await (const entry of this.#store.journalAfter(sink.held())) {
        const { series, ...meta } = entry.meta as unknown as { series: Series } & Page['meta'];
        const page = { key: entry.pageKey, series, number: entry.number, items: entry.output, meta };
        await writingTo(sink.path, () => deliverAlone(sink, page, entry.seq, this.#store.checkpoints));
        delivered += 1;
      }
    }
    await this.#prune();
    return delivered;
  }

  /** Writes the spend not yet written, that of answers whose pages never committed included (`SpendLedger.flush`). */
  flush(): Promise<void> {
    return this.#ledger.flush();
  }

  /** What a page commits, taken now: its progress and stage state, spend, journal entry, dedupe keys, rows, file bytes. */
  #prepare(page: Page<unknown>, seq: number): PreparedPage {
    const id = page.series.id;
    const fresh = page.meta.dedupe?.new ?? page.items.length;
    const streak = this.#book.streak(id, fresh);
    // Before its state is taken: the page's tracked ranks commit with it (depth until found: docs/design.md#pagination-and-stop-rules).
    const found = trackPage(this.#tracking, this.#states, page);
    const end: SeriesEndReason | undefined =
      page.meta.end ?? (page.meta.noNewLimit !== undefined && streak >= page.meta.noNewLimit ? 'no_new' : found ? 'found' : undefined);
    const { inside, before } = this.#taking;
    const commit: PageCommit = {
      runId: this.#runId,
      seq,
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
        state: this.#states.write(id, end !== undefined),
      },
      spend: this.#ledger.take(id, page.number),
      journal: this.#needsJournal
        ? { seq, runId: this.#runId, pageKey: page.key, seriesId: id, number: page.number, meta: toJson({ ...page.meta, series: page.series }), output: toJson(page.items), raw: null }
        : null,
      // The rows and bytes are the sinks' to make now: the page is theirs to read now.
      appends: before.map(({ sink, commits }) => writingTo(sink.path, () => commits.append(page))),
      checkpoints: [],
      rows: inside.map(({ commits }) => commits.rows(page, seq)),
      dedupe: this.#keys ? this.#keys.drain() : null,
      ...(this.#claimKeys ? { claimKeys: true } : {}),
    };
    return { page, commit, fresh, end, transacted: false };
  }

  /** The page to the store, its commit's errors said as the store's file's (or database's). */
  #handOver(commit: PageCommit): Promise<readonly number[]> {
    return writingTo(this.#store.path, () => this.#store.commitPage(commit));
  }

  /**
   * The page's transaction, then the sinks that take it after, once the pages before it are committed. `handedOver`:
   * its commit, already handed to a store that queues commits.
   */
  async #commitPrepared(prepared: PreparedPage, handedOver: Promise<readonly number[]> | undefined): Promise<CommitResult> {
    const { page, commit, fresh, end } = prepared;
    const id = page.series.id;
    // The length of each file of the page's `appends` once it is committed.
    let lengths: readonly number[];
    // A page of a series one of whose pages was refused: it commits emptied too (a retry fetches it again).
    const unstorable = this.#book.refusal(id);
    if (unstorable && handedOver === undefined) return this.#commitRefused(prepared, unstorable.cause);
    try {
      lengths = await (handedOver ?? this.#handOver(commit));
    } catch (error) {
      // A value the database refused (the transaction rolled back, the number not taken): the page commits without it.
      if (isRefusedValue(error)) return this.#commitRefused(prepared, error);
      // Refused by a worker's fence, the page took no number (its statement numbers pages, whoever commits), and the
      // pages after it, numbered already, go on: forgetting the number here would make each of them wait for it again,
      // in whatever order the reads answer (docs/design.md#the-run-host). Handed over behind a page of its series that
      // the database refused, the fence refused it for that (the series stayed where that page found it): it commits
      // emptied as well, after it.
      if (error instanceof SeriesLostError) return unstorable ? this.#commitRefused(prepared, unstorable.cause) : this.#lose(prepared);
      // Where the journal stands is no longer known (the commit may or may not have taken its number).
      this.#seq = undefined;
      throw error;
    }
    this.#committed(prepared, lengths);
    crashPoint('after-commit');
    for (const [index, sink] of this.#taking.after.entries()) {
      if (index > 0 || this.#taking.inside.length > 0) crashPoint('between-sinks');
      await writingTo(sink.path, () => deliverAlone(sink, page, commit.seq, this.#store.checkpoints));
    }
    await this.#prune();
    await this.#book.pageDone(id);
    return end ? { new: fresh, end } : { new: fresh };
  }

  /** The page's transaction committed: the sinks inside and before it hold the page (the files, `lengths` long). */
  #committed(prepared: PreparedPage, lengths: readonly number[]): void {
    const { commit } = prepared;
    prepared.transacted = true;
    if (commit.dedupe) this.#keys?.settled(commit.dedupe);
    // Marked once committed, not when taken: a page before it may prune meanwhile, and must not clear the mark.
    if (commit.journal) this.#unpruned = true;
    for (const { commits } of this.#taking.inside) commits.committed(commit.seq);
    this.#taking.before.forEach(({ commits }, index) => commits.committed({ seq: commit.seq, bytes: lengths[index] as number }));
  }

  /** Another worker has the series: this page (and the series' next ones here) are dropped, not a failure. */
  async #lose(prepared: PreparedPage): Promise<CommitResult> {
    const { commit } = prepared;
    // (The store took its files' bytes back.) Its answer was paid all the same.
    if (commit.dedupe) this.#keys?.settled(commit.dedupe);
    this.#ledger.paidNotCommitted(commit.spend);
    this.#book.lose(commit.series.seriesId);
    await this.#book.pageDone(commit.series.seriesId);
    return { new: 0, lost: true };
  }

  /**
   * A page whose values a database refused, even after what is replaced to make every value storable, and the pages
   * of its series after it: each commits without its rows in the sinks inside the transaction (their checkpoints move
   * on; a file that holds it keeps it), without its dedupe keys and stage state, its answer marked paid and not
   * committed. The series asks for no more pages and ends as failed with the reason (exit 5); a retry of it begins
   * at the refused page. The run goes on. If even the emptied page is refused, the run fails with the first error.
   */
  async #commitRefused(prepared: PreparedPage, error: unknown): Promise<CommitResult> {
    const { page, commit } = prepared;
    const id = page.series.id;
    const inside = this.#taking.inside;
    // Paged by number, a retry asks for the refused page again; by cursor it goes on after it (the cursor that led
    // there is not kept).
    const retryFrom = commit.progress.cursor === null ? page.number : null;
    const earlier = this.#book.refusal(id);
    const unstorable =
      earlier ??
      new UnstorablePageError(
        { seriesId: id, page: page.number, retryFrom },
        `page ${page.number} of series ${id} could not be stored (${error instanceof Error ? error.message : String(error)}): its rows were left out of ${inside.map(({ sink }) => sink.path).join(', ') || 'the state store'} and the series stopped there; \`--resume\` retries it ${retryFrom === null ? 'from the page after it' : 'from that page'} once the database takes it`,
        error,
      );
    const emptied: PageCommit = {
      ...commit,
      // Not ended by this page, whatever its own rule said: the series ends as failed once its pages are committed.
      // No digest: the page a retry asks for again must not be taken for a repeat of this one.
      progress: { ...commit.progress, status: 'active', reason: null, digest: '', written: 0, duplicates: 0, state: { kind: 'changes', json: null } },
      spend: paidNotCommitted(commit.spend),
      journal: null,
      // The files hold the page: its bytes were appended by its own commit, which the database refused (a store takes
      // back only the bytes of a page another worker has), or are now.
      appends: earlier ? commit.appends : commit.appends?.map((append) => ({ ...append, content: { text: '' } })),
      rows: inside.map(({ commits }) => commits.rows({ ...page, items: [] }, commit.seq)),
      dedupe: null,
    };
    delete emptied.claimKeys;
    // Known before the emptied page is handed over, so that no later page of the series is (`commit`).
    this.#book.refuse(id, unstorable);
    let lengths: readonly number[];
    try {
      lengths = await this.#handOver(emptied);
    } catch {
      this.#seq = undefined;
      throw error;
    } finally {
      if (commit.dedupe) this.#keys?.settled(commit.dedupe);
    }
    prepared.transacted = true;
    for (const { commits } of inside) commits.committed(commit.seq);
    this.#taking.before.forEach(({ commits }, index) => commits.committed({ seq: commit.seq, bytes: lengths[index] as number }));
    await this.#book.pageDone(id);
    return { new: 0 };
  }

  async #prune(): Promise<void> {
    if (this.#keepJournal || this.#sinks.length === 0 || !this.#unpruned) return;
    this.#unpruned = false;
    await this.#store.prune(Math.min(...this.#sinks.map((sink) => sink.held())));
  }
}

/** The run's committer (`PageCommitter`). */
export function createCommitter(options: CommitterOptions): PageCommitter {
  return new PageCommitter(options);
}

export type Committer = PageCommitter;
