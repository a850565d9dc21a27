import { OutputError } from '../../errors/output-error.ts';
import { atDatabase, retrying } from '../../postgres/failure.ts';
import { type Pool, type PoolClient, transaction } from '../../postgres/pools.ts';
import { quoteIdentifier } from '../../sql-identifier.ts';
import { SeriesLostError } from '../../errors/series-lost-error.ts';
import { type PostgresTarget, stateStoreWhere } from '../../postgres/target.ts';
import type {
  JournalEntry,
  Lease,
  NotificationKey,
  NotificationRecord,
  PageCommit,
  RunRecord,
  SeenKeyStore,
  SeriesEndRecord,
  SeriesIdentity,
  SeriesProgress,
  SeriesStatus,
  SeriesTotals,
  SinkCheckpoints,
  SpendRow,
  SpendTotals,
  StateStore,
} from '../interfaces.ts';
import { pendingKeys } from '../pending-keys.ts';
import { failedSeriesFrom, journalEntryFrom, notificationFrom, runRecordFrom, seriesProgressFrom } from '../rows.ts';
import { postgresOccurrences } from './occurrences.ts';
import { leasePipeline } from './lease.ts';
import { migrate } from './schema.ts';
import { insertSpend, pageStatement } from './page-statement.ts';
import { preparedQuery } from '../../commits/prepared-statement.ts';
import { stateStatements } from './statements.ts';
import { storable } from '../../postgres/storable.ts';
import { crashPoint } from '../../crash-points.ts';

export interface PostgresStateStore extends StateStore {
  readonly kind: 'postgres';
  readonly pool: Pool;
  readonly schema: string;
  /**
   * The same store as a worker of a distributed run commits to it (docs/design.md#the-run-host), behind `fence`: a
   * page commits only if its series is still where this worker left it (else `SeriesLostError`, and nothing is
   * written), the journal takes the next number whoever commits, and a series' end completes its job (`finish`,
   * false: the job is no longer this worker's) in the same transaction. This store itself is left as it was.
   */
  fenced(fence: SeriesFence): StateStore;
}

/** What fences a worker's commits: who it is, and its series' jobs, completed in the transaction that ends a series. */
export interface SeriesFence {
  /** The worker's id: each page it commits is counted on its `workers` row in the page's own statement. */
  workerId: string;
  finish(seriesId: string, db: PoolClient): Promise<boolean>;
  /** A page of this worker's was committed. */
  committed(): void;
}

/** What a store and each of its fenced views share: the database, the schema's statements, the pipeline. */
interface StoreParts {
  pool: Pool;
  schema: string;
  pipeline: string;
  target: PostgresTarget;
}

/**
 * The run-state store in PostgreSQL (docs/design.md#the-state-store), the same tables as SQLite's under one schema
 * (default `webdata`), created and migrated here. Unlike a SQLite file, one schema serves many pipelines: everything a
 * run writes carries its pipeline, and the lease is one pipeline's. A page commits as one statement, with the rows of
 * PostgreSQL sinks on the same database in it (`page-statement.ts`).
 */
export async function postgresStateStore(pool: Pool, target: PostgresTarget, options: { schema: string; pipeline: string }): Promise<PostgresStateStore> {
  const store = new PostgresStore({ pool, schema: options.schema, pipeline: options.pipeline, target });
  await store.open();
  return store;
}

class PostgresStore implements PostgresStateStore {
  readonly kind = 'postgres';
  readonly pool: Pool;
  readonly schema: string;
  readonly path: string;
  readonly database: string;
  readonly checkpoints: SinkCheckpoints;
  readonly #parts: StoreParts;
  readonly #pipeline: string;
  readonly #where: string;
  readonly #s: string;
  readonly #sql: ReturnType<typeof stateStatements>;
  /** A worker's fence (`fenced`); none: this process alone holds the pipeline's lease. */
  readonly #fence: SeriesFence | undefined;
  // A schedule's occurrences (occurrences.ts).
  readonly claimOccurrence: StateStore['claimOccurrence'];
  readonly storeClock: StateStore['storeClock'];
  readonly settleOccurrence: StateStore['settleOccurrence'];
  readonly occurrences: StateStore['occurrences'];
  readonly pruneOccurrences: StateStore['pruneOccurrences'];

  constructor(parts: StoreParts, fence?: SeriesFence) {
    const { pool, schema, pipeline, target } = parts;
    this.#parts = parts;
    this.#pipeline = pipeline;
    this.#fence = fence;
    this.pool = pool;
    this.schema = schema;
    this.path = `${target.label} (schema ${schema})`;
    this.database = target.database;
    this.#where = stateStoreWhere(target);
    this.#s = quoteIdentifier(schema);
    this.#sql = stateStatements(this.#s);
    const occurrences = postgresOccurrences({ pool, sql: this.#sql, where: this.#where });
    this.claimOccurrence = occurrences.claimOccurrence;
    this.storeClock = occurrences.storeClock;
    this.settleOccurrence = occurrences.settleOccurrence;
    this.occurrences = occurrences.occurrences;
    this.pruneOccurrences = occurrences.pruneOccurrences;
    this.checkpoints = {
      get: async (sinkId) => {
        const rows = await this.#query<{ seq: string; bytes: string | null }>(this.#sql.checkpoint, [pipeline, sinkId]);
        const row = rows[0];
        return row && { seq: Number(row.seq), bytes: row.bytes === null ? null : Number(row.bytes) };
      },
      set: async (sinkId, checkpoint) => {
        await retrying(this.#where, () => pool.query(this.#sql.setCheckpoint, [pipeline, sinkId, checkpoint.seq, checkpoint.bytes]), { idempotent: true });
      },
    };
  }

  /** Creates or migrates the schema, and the pipeline's row. */
  async open(): Promise<void> {
    await atDatabase(this.#where, () => migrate(this.pool, this.schema, this.#parts.target.label), this.pool);
    await this.#query(this.#sql.addPipeline, [this.#pipeline]);
  }

  fenced(fence: SeriesFence): StateStore {
    return new PostgresStore(this.#parts, fence);
  }

  lease(name: string): Promise<Lease> {
    return atDatabase(this.#where, () => leasePipeline(this.pool, this.#sql, this.schema, name));
  }

  seenKeys(runId: string): SeenKeyStore {
    return pendingKeys(runId, {
      has: async (scope, keys) => {
        const rows = await this.#query<{ key: string }>(this.#sql.seenKeys, [this.#pipeline, scope, keys]);
        return rows.map((row) => row.key);
      },
      forgetRun: async () => void (await this.#query(this.#sql.forgetRunKeys, [this.#pipeline, runId])),
    });
  }

  async startRun(run: { runId: string; pipeline: string; startedAt: string; fingerprint: string; plan: unknown; budget: number | null; terms?: unknown }): Promise<void> {
    // Run-scoped dedupe keys of the pipeline's finished runs go: the last worker of a distributed run forgets its
    // run's keys, but two that finish at once each leave them to the other (a run that goes on must keep them).
    await this.#query(this.#sql.dropFinishedRunKeys, [this.#pipeline]);
    await this.#query(this.#sql.insertRun, [
      run.runId,
      run.pipeline,
      run.startedAt,
      run.fingerprint,
      JSON.stringify(run.plan),
      run.budget,
      run.terms === undefined ? null : JSON.stringify(run.terms),
    ]);
  }

  async reopenRun(runId: string, budget: number | null, terms?: unknown): Promise<void> {
    await this.#query(this.#sql.reopenRun, [budget, runId, terms === undefined ? null : JSON.stringify(terms)]);
  }

  async finishRun(runId: string, status: string, finishedAt: string, summary: unknown, error?: string): Promise<void> {
    await this.#query(this.#sql.finishRun, [status, finishedAt, summary === undefined ? null : JSON.stringify(summary), error ?? null, runId]);
  }

  async latestRun(name: string): Promise<RunRecord | undefined> {
    // In the order runs were recorded (a sequence), never by `started_at`: that is the clock of whichever machine
    // started the run, and a machine whose clock is behind would make a run at work look older than a finished one.
    const rows = await this.#query(this.#sql.latestRun, [name]);
    return rows[0] && runRecordFrom(rows[0]);
  }

  async runs(name: string): Promise<RunRecord[]> {
    return (await this.#query(this.#sql.runs, [name])).map(runRecordFrom);
  }

  async abandonRun(runId: string, at: string): Promise<void> {
    const sql = this.#sql;
    await retrying(
      this.#where,
      () =>
        transaction(this.pool, async (client) => {
          await client.query(sql.abandonPages, [this.#pipeline, runId]);
          await client.query(sql.abandonSeries, [runId]);
          await client.query(sql.abandonStateChanges, [runId]);
          await client.query(sql.markAbandoned, [at, runId]);
        }),
      { idempotent: true },
    );
  }

  currentSeq(): Promise<number> {
    return retrying(this.#where, () => this.#currentSeq(), { idempotent: true });
  }

  async progress(runId: string, seriesId: string): Promise<SeriesProgress | undefined> {
    // The row and the changes after its snapshot in one statement: a worker may be committing the series meanwhile.
    const row = (await this.#query(this.#sql.progress, [runId, seriesId]))[0];
    return row && seriesProgressFrom(seriesId, row, row.state_changes as string[]);
  }

  async commitPage(commit: PageCommit): Promise<void> {
    await retrying(
      this.#where,
      async (attempt) => {
        // A lost answer to COMMIT leaves the page committed or not: `#landed` says which.
        if (attempt > 1 && (await this.#landed(commit))) return void this.#fence?.committed();
        await this.#commitOnce(commit);
      },
      { idempotent: true },
    );
  }

  async endSeries(runId: string, series: SeriesIdentity, end: SeriesEndRecord): Promise<void> {
    const fence = this.#fence;
    const write = async (db: Pool | PoolClient) =>
      (
        await db.query(
          fence ? this.#sql.endWorkerSeries : this.#sql.endSeries,
          [runId, series.seriesId, series.endpoint, series.query, series.country, series.lang, end.status, end.reason, end.nextPage, end.error, end.errorKind].map(storable),
        )
      ).rowCount;
    if (!fence || end.status !== 'ended') return void (await retrying(this.#where, () => write(this.pool), { idempotent: true }));
    // A worker's series ends with its job, in one transaction; a job no longer this worker's leaves the series alone.
    await retrying(
      this.#where,
      () =>
        transaction(this.pool, async (client) => {
          if ((await write(client)) === 0 || !(await fence.finish(series.seriesId, client))) throw lost(series.seriesId);
        }),
      { idempotent: true },
    );
  }

  async seriesTotals(runId: string): Promise<SeriesTotals> {
    return (await this.#query<SeriesTotals>(this.#sql.seriesTotals, [runId]))[0] as SeriesTotals;
  }

  seriesEnds(runId: string): Promise<{ status: string; reason: string | null; n: number }[]> {
    return this.#query<{ status: string; reason: string | null; n: number }>(this.#sql.seriesEnds, [runId]);
  }

  seriesStatuses(runId: string, seriesIds: readonly string[]): Promise<SeriesStatus[]> {
    return this.#query<SeriesStatus>(this.#sql.seriesStatuses, [runId, seriesIds]);
  }

  async failedKinds(runId: string): Promise<Record<string, number>> {
    const rows = await this.#query<{ kind: string; n: number }>(this.#sql.failedKinds, [runId]);
    return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
  }

  async *journalAfter(seq: number): AsyncGenerator<JournalEntry> {
    let after = seq;
    for (;;) {
      const rows = await this.#query(this.#sql.journalAfter, [this.#pipeline, after]);
      if (rows.length === 0) return;
      for (const row of rows) {
        const entry = journalEntryFrom(row);
        after = entry.seq;
        yield entry;
      }
    }
  }

  async prune(heldByAll: number): Promise<void> {
    await this.#query(this.#sql.prune, [this.#pipeline, heldByAll]);
  }

  spend(rows: readonly SpendRow[]): Promise<void> {
    // Not idempotent: a lost answer may hide a written row, so only a failure to send is tried again.
    return retrying(this.#where, () => this.#writeSpend(rows), { idempotent: false });
  }

  async spendOf(runId: string): Promise<SpendTotals> {
    const sql = this.#sql;
    type Totals = { spent: number; uncertain: number; uncommitted: number; requests: number; retries: number };
    const totals = (await this.#query<Totals>(sql.spendTotals, [runId]))[0] as Totals;
    const byStatus = await this.#query<{ status: string; n: number }>(sql.spendByStatus, [runId]);
    const byPath = await this.#query<{ path: string; credits: number }>(sql.spendByPath, [runId]);
    return { ...totals, byStatus: Object.fromEntries(byStatus.map((r) => [r.status, r.n])), byEndpoint: Object.fromEntries(byPath.map((r) => [r.path, r.credits])) };
  }

  async recordSinkStarts(runId: string, starts: readonly { sinkId: string; seq: number; bytes: number | null }[]): Promise<void> {
    for (const start of starts) {
      await this.#query(this.#sql.recordSinkStart, [runId, start.sinkId, start.seq, start.bytes]);
    }
  }

  async sinkStarts(runId: string): Promise<Map<string, { seq: number; bytes: number | null }>> {
    const rows = await this.#query<{ sink_id: string; start_seq: string; start_bytes: string | null }>(this.#sql.sinkStarts, [runId]);
    return new Map(rows.map((r) => [r.sink_id, { seq: Number(r.start_seq), bytes: r.start_bytes === null ? null : Number(r.start_bytes) }]));
  }

  async failedSeries(runId: string, limit: number): Promise<(SeriesIdentity & { errorKind: string | null; error: string | null })[]> {
    return (await this.#query(this.#sql.failedSeries, [runId, limit])).map(failedSeriesFrom);
  }

  async claimNotification(notification: Omit<NotificationRecord, 'status' | 'attempts' | 'error' | 'updatedAt'>): Promise<boolean> {
    const { runId, invocation, webhook, pipeline, target, event, body, createdAt } = notification;
    // Not retried on a lost answer: the row may have gone in, and a second try would then find it and send nothing.
    // A claim whose answer is lost is left to the next invocation, which finds it pending.
    const { rowCount } = await atDatabase(this.#where, () => this.pool.query(this.#sql.claimNotification, [runId, invocation, webhook, pipeline, target, event, body, createdAt].map(storable)));
    return rowCount === 1;
  }

  async settleNotification(key: NotificationKey, outcome: { status: NotificationRecord['status']; attempts: number; error: string | null; at: string }): Promise<void> {
    // Not idempotent (attempts add up), but a repeat only overcounts attempts: safe to try again.
    await this.#query(this.#sql.settleNotification, [key.runId, key.invocation, key.webhook, outcome.status, outcome.attempts, outcome.error, outcome.at]);
  }

  async pendingNotifications(pipeline: string, limit: number, staleBefore: string): Promise<NotificationRecord[]> {
    return (await this.#query(this.#sql.pendingNotifications, [pipeline, limit, staleBefore])).map(notificationFrom);
  }

  async takeNotification(key: NotificationKey, at: string, staleBefore: string): Promise<boolean> {
    // Safe to try again: a repeat after a lost answer finds the row `sending` as of `at`, which is this taker's.
    return (await this.#query(this.#sql.takeNotification, [key.runId, key.invocation, key.webhook, at, staleBefore])).length === 1;
  }

  /**
   * The whole page — its state, and the rows and checkpoints of the sinks on this database — is one statement
   * (page-statement.ts), which applies only if the page took its place.
   */
  async #commitOnce(commit: PageCommit): Promise<void> {
    const fence = this.#fence;
    const { statement: page, claiming } = pageStatement(this.#s, this.#pipeline, commit, fence?.workerId);
    const dedupe = commit.dedupe;
    crashPoint('page-transaction');
    const statement = page.sql(claiming ? this.#sql.pageTakenClaimed : this.#sql.pageTaken);
    // The page that ends its series completes the series' job in the same transaction: a crash between the two
    // would otherwise leave a finished series queued, or a completed job whose last page never landed.
    const taken =
      fence && commit.progress.status === 'ended'
        ? await transaction(this.pool, async (client) => {
            const { rows } = await client.query<{ seq: string; claimed?: number }>(preparedQuery(statement, page.values));
            if (rows.length > 0 && !(await fence.finish(commit.series.seriesId, client))) throw lost(commit.series.seriesId);
            return rows;
          })
        : (await this.pool.query<{ seq: string; claimed?: number }>(preparedQuery(statement, page.values))).rows;
    const refused = claiming && taken[0] ? (dedupe?.keys.length ?? 0) - (taken[0].claimed ?? 0) : 0;
    // Rows dropped for keys another worker took first were counted as written by the stages: the series' counts
    // are put right (a row of the series cannot be changed twice in the page's own statement).
    if (refused > 0) {
      await this.#query(this.#sql.uncountRefused, [commit.runId, commit.series.seriesId, refused]);
    }
    if (taken.length > 0) return void fence?.committed();
    if (fence) throw lost(commit.series.seriesId);
    throw new OutputError('locked', `the page journal of pipeline "${this.#pipeline}" moved under this run: another process is writing its state. Run again once it has finished`, undefined);
  }

  /**
   * Whether a page whose answer to COMMIT was lost went in. Alone, the journal's number says (this run holds the
   * pipeline's lease, so nobody else moves it); behind a fence, whether the series has gone past the page.
   */
  async #landed(commit: PageCommit): Promise<boolean> {
    if (!this.#fence) return (await this.#currentSeq()) >= commit.seq;
    const number = commit.progress.nextPage - 1;
    const { rows } = await this.pool.query<{ next_page: number | null; status: string }>(this.#sql.seriesPosition, [commit.runId, commit.series.seriesId]);
    const row = rows[0];
    return row !== undefined && (row.status === 'ended' || (row.next_page ?? 0) > number);
  }

  async #currentSeq(): Promise<number> {
    const { rows } = await this.pool.query<{ seq: string }>(this.#sql.currentSeq, [this.#pipeline]);
    return Number(rows[0]?.seq ?? 0);
  }

  async #writeSpend(rows: readonly SpendRow[]): Promise<void> {
    if (rows.length === 0) return;
    const values: unknown[] = [];
    await this.pool.query(insertSpend(this.#s, (value) => `$${values.push(storable(value))}`, rows), values);
  }

  /**
   * Past its opening (where an unreachable server stops the run at once, before any request), the store waits out a
   * server that went away: every statement here is safe to repeat, but the spend rows' INSERT (see `spend`).
   */
  async #query<R extends object = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<R[]> {
    return retrying(this.#where, async () => (await this.pool.query<R>(text, values.map(storable))).rows, { idempotent: true });
  }
}

function lost(seriesId: string): SeriesLostError {
  return new SeriesLostError(seriesId, `series ${seriesId} was taken over by another worker (this one stalled past its heartbeat): its page here was not written`);
}
