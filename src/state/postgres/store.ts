import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { LeaseHeldError } from '../../errors/lease-held-error.ts';
import { OutputError } from '../../errors/output-error.ts';
import { tryAdvisoryLock } from '../../postgres/advisory-lock.ts';
import { atDatabase, retrying } from '../../postgres/failure.ts';
import { type Pool, type PoolClient, transaction } from '../../postgres/pools.ts';
import { quoteIdentifier } from '../../sql-identifier.ts';
import { SeriesLostError } from '../../errors/series-lost-error.ts';
import type { PostgresTarget } from '../../postgres/target.ts';
import { type Checkpoint, type JournalEntry, type Lease, type PageCommit, type SeenKeyStore, type SpendRow, type StateStore } from '../interfaces.ts';
import { pendingKeys } from '../pending-keys.ts';
import { journalEntryFrom, runRecordFrom, seriesProgressFrom } from '../rows.ts';
import { migrate } from './schema.ts';
import { insertSpend, pageStatement } from './page-statement.ts';
import { stateStatements } from './statements.ts';
import { storable } from '../../postgres/storable.ts';
import { crashPoint } from '../../crash-points.ts';

export interface PostgresStateStore extends StateStore {
  readonly kind: 'postgres';
  readonly pool: Pool;
  readonly schema: string;
  /**
   * Makes this store a worker's of a distributed run: a page commits only if its series is still where this worker
   * left it (else `SeriesLostError`, and nothing is written), the journal takes the next number whoever commits, and a
   * series' end completes its job (`finish`, false: the job is no longer this worker's) in the same transaction.
   */
  joinAsWorker(claims: WorkerClaims): void;
}

export interface WorkerClaims {
  /** The worker's id: each page it commits is counted on its `workers` row in the page's own statement. */
  workerId: string;
  finish(seriesId: string, db: PoolClient): Promise<boolean>;
  /** A page of this worker's was committed. */
  committed(): void;
}


/**
 * The run-state store in PostgreSQL (docs/design.md#the-state-store), the same tables as SQLite's under one schema
 * (default `webdata`), created and migrated here. Unlike a SQLite file, one schema serves many pipelines: everything a
 * run writes carries its pipeline, and the lease is one pipeline's. A page commits as one statement, with the rows of
 * PostgreSQL sinks on the same database in it (`page-statement.ts`).
 */
export async function postgresStateStore(pool: Pool, target: PostgresTarget, options: { schema: string; pipeline: string }): Promise<PostgresStateStore> {
  const { schema, pipeline } = options;
  const where = `the state store ${target.label}`;
  const s = quoteIdentifier(schema);
  const sql = stateStatements(s);
  await atDatabase(where, () => migrate(pool, schema, target.label));
  // Past its opening (where an unreachable server stops the run at once, before any request), the store waits out a
  // server that went away: every statement here is safe to repeat, but the spend rows' INSERT (see `spend`).
  const query = <R extends object = Record<string, unknown>>(text: string, values: unknown[] = []) =>
    retrying(where, async () => (await pool.query<R>(text, values.map(storable))).rows, { idempotent: true });
  await query(sql.addPipeline, [pipeline]);

  const currentSeq = async () => {
    const { rows } = await pool.query<{ seq: string }>(sql.currentSeq, [pipeline]);
    return Number(rows[0]?.seq ?? 0);
  };
  const writeSpend = async (rows: readonly SpendRow[]) => {
    if (rows.length === 0) return;
    const values: unknown[] = [];
    await pool.query(insertSpend(s, (value) => `$${values.push(storable(value))}`, rows), values);
  };
  const setCheckpoint = (sinkId: string, checkpoint: Checkpoint) =>
    pool.query(
      sql.setCheckpoint,
      [pipeline, sinkId, checkpoint.seq, checkpoint.bytes],
    );

  // Set once this store serves a worker of a distributed run (`joinAsWorker`).
  let worker: WorkerClaims | undefined;
  const lost = (seriesId: string) => new SeriesLostError(seriesId, `series ${seriesId} was taken over by another worker (this one stalled past its heartbeat): its page here was not written`);
  /** Whether a series has gone past page `number` (a worker's commit whose answer was lost). */
  const seriesPassed = async (runId: string, seriesId: string, number: number) => {
    const { rows } = await pool.query<{ next_page: number | null; status: string }>(sql.seriesPosition, [runId, seriesId]);
    const row = rows[0];
    return row !== undefined && (row.status === 'ended' || (row.next_page ?? 0) > number);
  };

  const store: PostgresStateStore = {
    kind: 'postgres',
    pool,
    schema,
    path: `${target.label} (schema ${schema})`,
    database: target.database,
    lease: (name) => atDatabase(where, () => leasePipeline(pool, sql, schema, name)),
    joinAsWorker(claims) {
      worker = claims;
    },
    checkpoints: {
      async get(sinkId) {
        const rows = await query<{ seq: string; bytes: string | null }>(sql.checkpoint, [pipeline, sinkId]);
        const row = rows[0];
        return row && { seq: Number(row.seq), bytes: row.bytes === null ? null : Number(row.bytes) };
      },
      async set(sinkId, checkpoint) {
        await retrying(where, () => setCheckpoint(sinkId, checkpoint), { idempotent: true });
      },
    },
    seenKeys(runId): SeenKeyStore {
      return pendingKeys(runId, {
        async has(scope, keys) {
          const rows = await query<{ key: string }>(sql.seenKeys, [pipeline, scope, keys]);
          return rows.map((row) => row.key);
        },
        forgetRun: async () => void (await query(sql.forgetRunKeys, [pipeline, runId])),
      });
    },

    async startRun(run) {
      // Run-scoped dedupe keys of the pipeline's finished runs go: the last worker of a distributed run forgets its
      // run's keys, but two that finish at once each leave them to the other (a run that goes on must keep them).
      await query(
        sql.dropFinishedRunKeys,
        [pipeline],
      );
      await query(sql.insertRun, [
        run.runId,
        run.pipeline,
        run.startedAt,
        run.fingerprint,
        JSON.stringify(run.plan),
        run.budget,
        run.terms === undefined ? null : JSON.stringify(run.terms),
      ]);
    },
    async reopenRun(runId, budget, terms) {
      await query(sql.reopenRun, [
        budget,
        runId,
        terms === undefined ? null : JSON.stringify(terms),
      ]);
    },
    async finishRun(runId, status, finishedAt, summary, error) {
      await query(sql.finishRun, [
        status,
        finishedAt,
        summary === undefined ? null : JSON.stringify(summary),
        error ?? null,
        runId,
      ]);
    },
    async latestRun(name) {
      // In the order runs were recorded (a sequence), never by `started_at`: that is the clock of whichever machine
      // started the run, and a machine whose clock is behind would make a run at work look older than a finished one.
      const rows = await query(sql.latestRun, [name]);
      return rows[0] && runRecordFrom(rows[0]);
    },
    async runs(name) {
      return (await query(sql.runs, [name])).map(runRecordFrom);
    },
    async abandonRun(runId, at) {
      await retrying(
        where,
        () =>
          transaction(pool, async (client) => {
            await client.query(sql.abandonPages, [pipeline, runId]);
            await client.query(sql.abandonSeries, [runId]);
            await client.query(sql.abandonStateChanges, [runId]);
            await client.query(sql.markAbandoned, [at, runId]);
          }),
        { idempotent: true },
      );
    },

    currentSeq: () => retrying(where, currentSeq, { idempotent: true }),
    async progress(runId, seriesId) {
      // The row and the changes after its snapshot in one statement: a worker may be committing the series meanwhile.
      const row = (
        await query(
          sql.progress,
          [runId, seriesId],
        )
      )[0];
      return row && seriesProgressFrom(seriesId, row, row.state_changes as string[]);
    },
    async commitPage(commit: PageCommit) {
      // The whole page — its state, and the rows and checkpoints of the sinks on this database — is one statement
      // (page-statement.ts), which applies only if the page took its place.
      const number = commit.progress.nextPage - 1;
      const commitOnce = async () => {
        const { w, claiming } = pageStatement(s, pipeline, commit, worker?.workerId);
        const dedupe = commit.dedupe;
        crashPoint('page-transaction');
        const statement = w.sql(claiming ? 'SELECT seq, (SELECT count(*) FROM w_claimed)::int AS claimed FROM w_seq' : 'SELECT seq FROM w_seq');
        // The page that ends its series completes the series' job in the same transaction: a crash between the two
        // would otherwise leave a finished series queued, or a completed job whose last page never landed.
        const claims = worker;
        const taken =
          claims && commit.progress.status === 'ended'
            ? await transaction(pool, async (client) => {
                const { rows } = await client.query<{ seq: string; claimed?: number }>(statement, w.values);
                if (rows.length > 0 && !(await claims.finish(commit.series.seriesId, client))) throw lost(commit.series.seriesId);
                return rows;
              })
            : (await pool.query<{ seq: string; claimed?: number }>(statement, w.values)).rows;
        const refused = claiming && taken[0] ? (dedupe?.keys.length ?? 0) - (taken[0].claimed ?? 0) : 0;
        // Rows dropped for keys another worker took first were counted as written by the stages: the series' counts
        // are put right (a row of the series cannot be changed twice in the page's own statement).
        if (refused > 0) {
          await query(sql.uncountRefused, [commit.runId, commit.series.seriesId, refused]);
        }
        if (taken.length > 0) return void claims?.committed();
        if (worker) throw lost(commit.series.seriesId);
        throw new OutputError('locked', `the page journal of pipeline "${pipeline}" moved under this run: another process is writing its state. Run again once it has finished`, undefined);
      };
      await retrying(
        where,
        async (attempt) => {
          // A lost answer to COMMIT leaves the page committed or not. Alone, the journal's number says which (this
          // run holds the pipeline's lease, so nobody else moves it); as a worker, the series' next page does.
          if (attempt > 1 && (worker ? await seriesPassed(commit.runId, commit.series.seriesId, number) : (await currentSeq()) >= commit.seq)) return void worker?.committed();
          await commitOnce();
        },
        { idempotent: true },
      );
    },
    async endSeries(runId, series, end) {
      const write = async (db: Pool | PoolClient) =>
        (
          await db.query(
            worker ? sql.endWorkerSeries : sql.endSeries,
            [runId, series.seriesId, series.endpoint, series.query, series.country, series.lang, end.status, end.reason, end.nextPage, end.error, end.errorKind].map(storable),
          )
        ).rowCount;
      const claims = worker;
      if (!claims || end.status !== 'ended') return void (await retrying(where, () => write(pool), { idempotent: true }));
      // A worker's series ends with its job, in one transaction; a job no longer this worker's leaves the series alone.
      await retrying(
        where,
        () =>
          transaction(pool, async (client) => {
            if ((await write(client)) === 0 || !(await claims.finish(series.seriesId, client))) throw lost(series.seriesId);
          }),
        { idempotent: true },
      );
    },
    async seriesTotals(runId) {
      const rows = await query<{ pages: number; served: number; written: number; duplicates: number }>(
        sql.seriesTotals,
        [runId],
      );
      return rows[0] as { pages: number; served: number; written: number; duplicates: number };
    },
    async seriesEnds(runId) {
      return query<{ status: string; reason: string | null; n: number }>(sql.seriesEnds, [runId]);
    },
    async failedKinds(runId) {
      const rows = await query<{ kind: string; n: number }>(
        sql.failedKinds,
        [runId],
      );
      return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
    },

    async *journalAfter(seq): AsyncGenerator<JournalEntry> {
      let after = seq;
      for (;;) {
        const rows = await query(sql.journalAfter, [pipeline, after]);
        if (rows.length === 0) return;
        for (const row of rows) {
          const entry = journalEntryFrom(row);
          after = entry.seq;
          yield entry;
        }
      }
    },
    async prune(heldByAll) {
      await query(sql.prune, [pipeline, heldByAll]);
    },

    // Not idempotent: a lost answer may hide a written row, so only a failure to send is tried again.
    spend: (rows) => retrying(where, () => writeSpend(rows), { idempotent: false }),
    async spendOf(runId) {
      const totals = (
        await query<{ spent: number; uncertain: number; uncommitted: number; requests: number; retries: number }>(
          sql.spendTotals,
          [runId],
        )
      )[0] as { spent: number; uncertain: number; uncommitted: number; requests: number; retries: number };
      const byStatus = await query<{ status: string; n: number }>(sql.spendByStatus, [runId]);
      const byPath = await query<{ path: string; credits: number }>(
        sql.spendByPath,
        [runId],
      );
      return { ...totals, byStatus: Object.fromEntries(byStatus.map((r) => [r.status, r.n])), byEndpoint: Object.fromEntries(byPath.map((r) => [r.path, r.credits])) };
    },

    async recordSinkStarts(runId, starts) {
      for (const start of starts) {
        await query(sql.recordSinkStart, [runId, start.sinkId, start.seq, start.bytes]);
      }
    },
    async sinkStarts(runId) {
      const rows = await query<{ sink_id: string; start_seq: string; start_bytes: string | null }>(sql.sinkStarts, [runId]);
      return new Map(rows.map((r) => [r.sink_id, { seq: Number(r.start_seq), bytes: r.start_bytes === null ? null : Number(r.start_bytes) }]));
    },
  };
  return store;
}

/**
 * One run of a pipeline at a time, across every machine using this database: an advisory lock held for the run's
 * length (it goes with a dead holder's connection). The `leases` row only says who holds it, for another run's message.
 */
async function leasePipeline(pool: Pool, sql: ReturnType<typeof stateStatements>, schema: string, pipeline: string): Promise<Lease> {
  const lock = await tryAdvisoryLock(pool, `webdata-etl:${schema}:${pipeline}`);
  if (!lock) {
    const holder = (await pool.query<{ pid: number; host: string; acquired_at: Date }>(sql.leaseHolder, [pipeline])).rows[0];
    const since = holder?.acquired_at.toISOString() ?? 'unknown';
    const who = holder ? `pid ${holder.pid} on ${holder.host}, since ${since}` : 'another process';
    throw new LeaseHeldError(
      `pipeline "${pipeline}" is already running (${who}): one run of a pipeline at a time. Wait for it to finish, or stop it (Ctrl-C, or kill the process) and run again. ` +
        '(Many processes share a run when its state and every sink are in one PostgreSQL database and its dedupe is per series: see docs/distributed.md.)',
      { pipeline, pid: holder?.pid ?? 0, host: holder?.host ?? 'unknown', since },
    );
  }
  const holder = randomBytes(8).toString('hex');
  try {
    await lock.client.query(
      sql.takeLease,
      [pipeline, holder, process.pid, hostname()],
    );
  } catch (error) {
    await lock.release();
    throw error;
  }
  return {
    async release() {
      await lock.client.query(sql.giveLease, [pipeline, holder]).catch(() => undefined);
      await lock.release();
    },
  };
}
