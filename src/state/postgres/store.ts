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
import { type Checkpoint, type JournalEntry, type Lease, type PageCommit, type PageStatement, type SeenKeyStore, type SpendRow, type StateStore, UNFINISHED_SQL } from '../interfaces.ts';
import { pendingKeys } from '../pending-keys.ts';
import { journalEntryFrom, runRecordFrom, seriesProgressFrom } from '../rows.ts';
import { migrate } from './schema.ts';
import { storable } from '../../postgres/storable.ts';

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

const JOURNAL_BATCH = 256;

/**
 * The run-state store in PostgreSQL (docs/design.md#the-state-store), the same tables as SQLite's under one schema
 * (default `webdata`), created and migrated here. Unlike a SQLite file, one schema serves many pipelines: everything a
 * run writes carries its pipeline, and the lease is one pipeline's. A page commits as one statement, with the rows of
 * PostgreSQL sinks on the same database added to it (`commitPage`'s `within`).
 */
export async function postgresStateStore(pool: Pool, target: PostgresTarget, options: { schema: string; pipeline: string }): Promise<PostgresStateStore> {
  const { schema, pipeline } = options;
  const where = `the state store ${target.label}`;
  const s = quoteIdentifier(schema);
  await atDatabase(where, () => migrate(pool, schema, target.label));
  // Past its opening (where an unreachable server stops the run at once, before any request), the store waits out a
  // server that went away: every statement here is safe to repeat, but the spend rows' INSERT (see `spend`).
  const query = <R extends object = Record<string, unknown>>(text: string, values: unknown[] = []) =>
    retrying(where, async () => (await pool.query<R>(text, values.map(storable))).rows, { idempotent: true });
  await query(`INSERT INTO ${s}.pipelines (pipeline) VALUES ($1) ON CONFLICT DO NOTHING`, [pipeline]);

  const currentSeq = async () => {
    const { rows } = await pool.query<{ seq: string }>(`SELECT seq FROM ${s}.pipelines WHERE pipeline = $1`, [pipeline]);
    return Number(rows[0]?.seq ?? 0);
  };
  /** The INSERT of spend rows (one array parameter per column), its parameters taken by `p`: alone, or in a page. */
  const insertSpend = (p: (value: unknown) => string, rows: readonly SpendRow[]) => {
    const c = columns(rows, (r) => [r.runId, r.at, r.seriesId, r.path, r.attempt, r.status, r.credits, r.uncertain, r.latencyMs, r.uncommitted === true], 10);
    const types = ['text', 'timestamptz', 'text', 'text', 'int', 'text', 'float8', 'bool', 'float8', 'bool'];
    return `INSERT INTO ${s}.spend (run_id, at, series_id, path, attempt, status, credits, uncertain, latency_ms, uncommitted)
            SELECT * FROM unnest(${c.map((column, i) => `${p(column)}::${types[i]}[]`).join(', ')})`;
  };
  const writeSpend = async (rows: readonly SpendRow[]) => {
    if (rows.length === 0) return;
    const values: unknown[] = [];
    await pool.query(insertSpend((value) => `$${values.push(storable(value))}`, rows), values);
  };
  const setCheckpoint = (sinkId: string, checkpoint: Checkpoint) =>
    pool.query(
      `INSERT INTO ${s}.sink_checkpoints (pipeline, sink_id, seq, bytes, updated_at) VALUES ($1, $2, $3, $4, now())
       ON CONFLICT (pipeline, sink_id) DO UPDATE SET seq = excluded.seq, bytes = excluded.bytes, updated_at = excluded.updated_at`,
      [pipeline, sinkId, checkpoint.seq, checkpoint.bytes],
    );

  // Set once this store serves a worker of a distributed run (`joinAsWorker`).
  let worker: WorkerClaims | undefined;
  const lost = (seriesId: string) => new SeriesLostError(seriesId, `series ${seriesId} was taken over by another worker (this one stalled past its heartbeat): its page here was not written`);
  /** The series' progress as the page leaves it: an upsert, applied `where` the row allows (a worker's claim). */
  const seriesUpsert = (w: PageStatement, commit: PageCommit, where: string, from = '') => {
    const { series, progress } = commit;
    const text = (value: unknown) => `${w.p(value)}::text`;
    const int = (value: unknown) => `${w.p(value)}::int`;
    return `INSERT INTO ${s}.series (run_id, series_id, endpoint, query, country, lang, status, reason, next_page, pages, items_served, items_written, duplicates, digest, no_new, cursor, state)
      SELECT ${[commit.runId, series.seriesId, series.endpoint, series.query, series.country, series.lang, progress.status, progress.reason].map(text).join(', ')},
        ${int(progress.nextPage)}, 1, ${int(progress.served)}, ${int(progress.written)}, ${int(progress.duplicates)}, ${text(progress.digest)}, ${int(progress.noNew)},
        ${text(progress.cursor)}, ${text(progress.state.kind === 'snapshot' ? progress.state.json : null)} ${from}
      ON CONFLICT (run_id, series_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, next_page = excluded.next_page,
        pages = series.pages + 1, items_served = series.items_served + excluded.items_served, items_written = series.items_written + excluded.items_written,
        duplicates = series.duplicates + excluded.duplicates, digest = excluded.digest, no_new = excluded.no_new, cursor = excluded.cursor,
        state = ${progress.state.kind === 'snapshot' ? 'excluded.state' : 'series.state'}, error = NULL ${where}`;
  };
  /** Whether a series has gone past page `number` (a worker's commit whose answer was lost). */
  const seriesPassed = async (runId: string, seriesId: string, number: number) => {
    const { rows } = await pool.query<{ next_page: number | null; status: string }>(`SELECT next_page, status FROM ${s}.series WHERE run_id = $1 AND series_id = $2`, [runId, seriesId]);
    const row = rows[0];
    return row !== undefined && (row.status === 'ended' || (row.next_page ?? 0) > number);
  };

  const store: PostgresStateStore = {
    kind: 'postgres',
    pool,
    schema,
    path: `${target.label} (schema ${schema})`,
    database: target.database,
    lease: (name) => atDatabase(where, () => leasePipeline(pool, s, schema, name)),
    joinAsWorker(claims) {
      worker = claims;
    },
    checkpoints: {
      async get(sinkId) {
        const rows = await query<{ seq: string; bytes: string | null }>(`SELECT seq, bytes FROM ${s}.sink_checkpoints WHERE pipeline = $1 AND sink_id = $2`, [pipeline, sinkId]);
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
          const rows = await query<{ key: string }>(`SELECT key FROM ${s}.dedupe_keys WHERE pipeline = $1 AND scope = $2 AND key = ANY($3::text[])`, [pipeline, scope, keys]);
          return rows.map((row) => row.key);
        },
        forgetRun: async () => void (await query(`DELETE FROM ${s}.dedupe_keys WHERE pipeline = $1 AND run_id = $2`, [pipeline, runId])),
      });
    },

    async startRun(run) {
      // Run-scoped dedupe keys of the pipeline's finished runs go: the last worker of a distributed run forgets its
      // run's keys, but two that finish at once each leave them to the other (a run that goes on must keep them).
      await query(
        `DELETE FROM ${s}.dedupe_keys WHERE pipeline = $1 AND run_id IN (SELECT run_id FROM ${s}.runs WHERE pipeline = $1 AND status NOT IN (${UNFINISHED_SQL}))`,
        [pipeline],
      );
      await query(`INSERT INTO ${s}.runs (run_id, pipeline, status, started_at, fingerprint, plan, budget, terms) VALUES ($1, $2, 'running', $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`, [
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
      await query(`UPDATE ${s}.runs SET status = 'running', finished_at = NULL, error = NULL, budget = $1, terms = coalesce($3, terms), invocations = invocations + 1 WHERE run_id = $2`, [
        budget,
        runId,
        terms === undefined ? null : JSON.stringify(terms),
      ]);
    },
    async finishRun(runId, status, finishedAt, summary, error) {
      await query(`UPDATE ${s}.runs SET status = $1, finished_at = $2, summary = $3, error = $4 WHERE run_id = $5`, [
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
      const rows = await query(`SELECT * FROM ${s}.runs WHERE pipeline = $1 AND status <> 'abandoned' ORDER BY created DESC LIMIT 1`, [name]);
      return rows[0] && runRecordFrom(rows[0]);
    },
    async runs(name) {
      return (await query(`SELECT * FROM ${s}.runs WHERE pipeline = $1 ORDER BY created`, [name])).map(runRecordFrom);
    },
    async abandonRun(runId, at) {
      await retrying(
        where,
        () =>
          transaction(pool, async (client) => {
            await client.query(`DELETE FROM ${s}.pages WHERE pipeline = $1 AND run_id = $2`, [pipeline, runId]);
            await client.query(`DELETE FROM ${s}.series WHERE run_id = $1`, [runId]);
            await client.query(`DELETE FROM ${s}.series_state WHERE run_id = $1`, [runId]);
            await client.query(`UPDATE ${s}.runs SET status = 'abandoned', finished_at = $1 WHERE run_id = $2`, [at, runId]);
          }),
        { idempotent: true },
      );
    },

    currentSeq: () => retrying(where, currentSeq, { idempotent: true }),
    async progress(runId, seriesId) {
      // The row and the changes after its snapshot in one statement: a worker may be committing the series meanwhile.
      const row = (
        await query(
          `SELECT series.*, ARRAY(SELECT changes FROM ${s}.series_state c WHERE c.run_id = series.run_id AND c.series_id = series.series_id ORDER BY seq) AS state_changes
           FROM ${s}.series WHERE run_id = $1 AND series_id = $2`,
          [runId, seriesId],
        )
      )[0];
      return row && seriesProgressFrom(seriesId, row, row.state_changes as string[]);
    },
    async commitPage(commit: PageCommit, within) {
      // The whole page — its state, and the rows and checkpoints of the sinks on this database — is one statement of
      // data-modifying CTEs: one round trip, atomic on its own. Each part applies only if the page took its place
      // (`guard`): alone, the journal's number moved to the page's; as a worker of a distributed run, the series was
      // still where this worker left it (another worker that took it over got ahead of a stalled one).
      const number = commit.progress.nextPage - 1;
      const commitOnce = async () => {
        const w = ctes(worker ? '(SELECT seq FROM w_seq)' : undefined);
        if (worker) {
          // Where this worker left it: at this page, or not begun (a row a stop wrote before the series' first page).
          const at = w.p(number);
          w.add(seriesUpsert(w, commit, `WHERE series.status <> 'ended' AND (series.next_page = ${at}::int OR (series.next_page IS NULL AND series.pages = 0)) RETURNING 1`), 'w_claim');
          w.add(`UPDATE ${s}.pipelines SET seq = seq + 1 WHERE pipeline = ${w.p(pipeline)} AND EXISTS (SELECT 1 FROM w_claim) RETURNING seq`, 'w_seq');
          // Counted with the page, so that the workers' pages add up to the run's (a worker killed before its next
          // beat included), and a page refused to this worker is not counted.
          w.add(`UPDATE ${s}.workers SET pages = pages + 1 WHERE run_id = ${w.p(commit.runId)}::text AND worker_id = ${w.p(worker.workerId)}::text AND EXISTS (SELECT 1 FROM w_seq)`);
        } else {
          w.add(`UPDATE ${s}.pipelines SET seq = seq + 1 WHERE pipeline = ${w.p(pipeline)} AND seq + 1 = ${w.p(commit.seq)}::bigint RETURNING seq`, 'w_seq');
        }
        const guard = w.guard;
        if (commit.spend.length > 0) w.add(`${insertSpend(w.p, commit.spend)} WHERE ${guard}`);
        const dedupe = commit.dedupe;
        // Keys another worker may take at the same moment are claimed: the insert returns the keys it took (one
        // waits for the other's commit, then finds the key taken), and the page's rows and first sightings follow it.
        const claiming = worker !== undefined && commit.claimKeys === true && dedupe !== null && dedupe.keys.length > 0;
        if (dedupe && dedupe.keys.length > 0) {
          const [scopes, keys, runIds] = columns(dedupe.keys, (k) => [k.scope, k.key, k.runId], 3);
          w.add(
            `INSERT INTO ${s}.dedupe_keys (pipeline, scope, key, run_id) SELECT ${w.p(pipeline)}::text, u.* FROM unnest(${w.p(scopes)}::text[], ${w.p(keys)}::text[], ${w.p(runIds)}::text[]) AS u
             WHERE ${guard} ON CONFLICT DO NOTHING${claiming ? ' RETURNING key' : ''}`,
            claiming ? 'w_claimed' : undefined,
          );
        }
        if (claiming) w.claim('(SELECT key FROM w_claimed)');
        if (dedupe && dedupe.sightings.length > 0) {
          const c = columns(dedupe.sightings, (x) => [x.key, x.query, x.country, x.lang, x.page, x.position, x.rank, x.fetchedAt, x.first], 9);
          const types = ['text', 'text', 'text', 'text', 'int', 'int', 'int', 'timestamptz', 'bool'];
          const first = claiming ? 'u.first AND u.key IN (SELECT key FROM w_claimed)' : 'u.first';
          w.add(
            `INSERT INTO ${s}.sightings (run_id, dedupe_key, query, country, lang, page, position, rank, fetched_at, first)
             SELECT ${w.p(commit.runId)}::text, u.key, u.query, u.country, u.lang, u.page, u.position, u.rank, u.fetched_at, ${first}
             FROM unnest(${c.map((column, i) => `${w.p(column)}::${types[i]}[]`).join(', ')}) AS u(key, query, country, lang, page, position, rank, fetched_at, first) WHERE ${guard}`,
          );
        }
        if (!worker) w.add(seriesUpsert(w, commit, '', 'FROM w_seq'));
        // A snapshot of the stage states replaces the changes before it; a page's changes go after them.
        const state = commit.progress.state;
        if (state.kind === 'snapshot') w.add(`DELETE FROM ${s}.series_state WHERE run_id = ${w.p(commit.runId)}::text AND series_id = ${w.p(commit.series.seriesId)}::text AND ${guard}`);
        else if (state.json !== null) {
          w.add(`INSERT INTO ${s}.series_state (run_id, series_id, seq, changes) SELECT ${w.p(commit.runId)}::text, ${w.p(commit.series.seriesId)}::text, seq, ${w.p(state.json)}::text FROM w_seq`);
        }
        const text = (value: unknown) => `${w.p(value)}::text`;
        const entry = commit.journal;
        if (entry) {
          w.add(
            `INSERT INTO ${s}.pages (pipeline, seq, run_id, page_key, series_id, number, meta, output, raw)
             SELECT ${text(pipeline)}, seq, ${[entry.runId, entry.pageKey, entry.seriesId].map(text).join(', ')}, ${w.p(entry.number)}::int, ${[entry.meta, entry.output, entry.raw].map(text).join(', ')} FROM w_seq`,
          );
        }
        if (commit.checkpoints.length > 0) {
          const [ids, seqs, bytes] = columns(commit.checkpoints, (c) => [c.sinkId, c.checkpoint.seq, c.checkpoint.bytes], 3);
          w.add(
            `INSERT INTO ${s}.sink_checkpoints (pipeline, sink_id, seq, bytes, updated_at)
             SELECT ${text(pipeline)}, u.*, now() FROM unnest(${w.p(ids)}::text[], ${w.p(seqs)}::bigint[], ${w.p(bytes)}::bigint[]) AS u WHERE ${guard}
             ON CONFLICT (pipeline, sink_id) DO UPDATE SET seq = excluded.seq, bytes = excluded.bytes, updated_at = excluded.updated_at`,
          );
        }
        await within?.({ kind: 'postgres', statement: w });
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
          await query(`UPDATE ${s}.series SET items_written = items_written - $3, duplicates = duplicates + $3 WHERE run_id = $1 AND series_id = $2`, [commit.runId, commit.series.seriesId, refused]);
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
            `INSERT INTO ${s}.series (run_id, series_id, endpoint, query, country, lang, status, reason, next_page, error, error_kind)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
             ON CONFLICT (run_id, series_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, error = excluded.error, error_kind = excluded.error_kind,
               next_page = COALESCE(excluded.next_page, series.next_page)
             ${worker ? `WHERE series.status <> 'ended'` : ''}`,
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
        `SELECT COALESCE(SUM(pages), 0)::float8 AS pages, COALESCE(SUM(items_served), 0)::float8 AS served, COALESCE(SUM(items_written), 0)::float8 AS written,
                COALESCE(SUM(duplicates), 0)::float8 AS duplicates FROM ${s}.series WHERE run_id = $1`,
        [runId],
      );
      return rows[0] as { pages: number; served: number; written: number; duplicates: number };
    },
    async seriesEnds(runId) {
      return query<{ status: string; reason: string | null; n: number }>(`SELECT status, reason, COUNT(*)::int AS n FROM ${s}.series WHERE run_id = $1 GROUP BY status, reason`, [runId]);
    },
    async failedKinds(runId) {
      const rows = await query<{ kind: string; n: number }>(
        `SELECT COALESCE(error_kind, 'error') AS kind, COUNT(*)::int AS n FROM ${s}.series WHERE run_id = $1 AND status = 'ended' AND reason = 'failed' GROUP BY kind`,
        [runId],
      );
      return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
    },

    async *journalAfter(seq): AsyncGenerator<JournalEntry> {
      let after = seq;
      for (;;) {
        const rows = await query(`SELECT * FROM ${s}.pages WHERE pipeline = $1 AND seq > $2 ORDER BY seq LIMIT ${JOURNAL_BATCH}`, [pipeline, after]);
        if (rows.length === 0) return;
        for (const row of rows) {
          const entry = journalEntryFrom(row);
          after = entry.seq;
          yield entry;
        }
      }
    },
    async prune(heldByAll) {
      await query(`DELETE FROM ${s}.pages WHERE pipeline = $1 AND seq <= $2`, [pipeline, heldByAll]);
    },

    // Not idempotent: a lost answer may hide a written row, so only a failure to send is tried again.
    spend: (rows) => retrying(where, () => writeSpend(rows), { idempotent: false }),
    async spendOf(runId) {
      const totals = (
        await query<{ spent: number; uncertain: number; uncommitted: number; requests: number; retries: number }>(
          `SELECT COALESCE(SUM(credits), 0)::float8 AS spent, COALESCE(SUM(CASE WHEN uncertain THEN credits ELSE 0 END), 0)::float8 AS uncertain,
                  COALESCE(SUM(CASE WHEN uncommitted THEN credits ELSE 0 END), 0)::float8 AS uncommitted,
                  COUNT(*)::int AS requests, COALESCE(SUM(CASE WHEN attempt > 1 THEN 1 ELSE 0 END), 0)::int AS retries FROM ${s}.spend WHERE run_id = $1`,
          [runId],
        )
      )[0] as { spent: number; uncertain: number; uncommitted: number; requests: number; retries: number };
      const byStatus = await query<{ status: string; n: number }>(`SELECT status, COUNT(*)::int AS n FROM ${s}.spend WHERE run_id = $1 GROUP BY status`, [runId]);
      const byPath = await query<{ path: string; credits: number }>(
        `SELECT path, SUM(credits)::float8 AS credits FROM ${s}.spend WHERE run_id = $1 AND credits > 0 GROUP BY path`,
        [runId],
      );
      return { ...totals, byStatus: Object.fromEntries(byStatus.map((r) => [r.status, r.n])), byEndpoint: Object.fromEntries(byPath.map((r) => [r.path, r.credits])) };
    },

    async recordSinkStarts(runId, starts) {
      for (const start of starts) {
        await query(`INSERT INTO ${s}.run_sinks (run_id, sink_id, start_seq, start_bytes) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, [runId, start.sinkId, start.seq, start.bytes]);
      }
    },
    async sinkStarts(runId) {
      const rows = await query<{ sink_id: string; start_seq: string; start_bytes: string | null }>(`SELECT sink_id, start_seq, start_bytes FROM ${s}.run_sinks WHERE run_id = $1`, [runId]);
      return new Map(rows.map((r) => [r.sink_id, { seq: Number(r.start_seq), bytes: r.start_bytes === null ? null : Number(r.start_bytes) }]));
    },
  };
  return store;
}

/**
 * One run of a pipeline at a time, across every machine using this database: an advisory lock held for the run's
 * length (it goes with a dead holder's connection). The `leases` row only says who holds it, for another run's message.
 */
async function leasePipeline(pool: Pool, s: string, schema: string, pipeline: string): Promise<Lease> {
  const lock = await tryAdvisoryLock(pool, `webdata-etl:${schema}:${pipeline}`);
  if (!lock) {
    const holder = (await pool.query<{ pid: number; host: string; acquired_at: Date }>(`SELECT pid, host, acquired_at FROM ${s}.leases WHERE pipeline = $1`, [pipeline])).rows[0];
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
      `INSERT INTO ${s}.leases (pipeline, holder, pid, host, acquired_at) VALUES ($1, $2, $3, $4, now())
       ON CONFLICT (pipeline) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, host = excluded.host, acquired_at = excluded.acquired_at`,
      [pipeline, holder, process.pid, hostname()],
    );
  } catch (error) {
    await lock.release();
    throw error;
  }
  return {
    async release() {
      await lock.client.query(`DELETE FROM ${s}.leases WHERE pipeline = $1 AND holder = $2`, [pipeline, holder]).catch(() => undefined);
      await lock.release();
    },
  };
}

/** One statement of data-modifying CTEs, its parameters numbered as they are added (`p`), the page's guard given. */
function ctes(seq?: string): PageStatement & { values: unknown[]; add(sql: string, name?: string): void; sql(final: string): string; claim(keys: string): void } {
  const values: unknown[] = [];
  const parts: string[] = [];
  let claimed: string | undefined;
  return {
    values,
    ...(seq === undefined ? {} : { seq }),
    get claimed() {
      return claimed;
    },
    claim: (keys: string) => {
      claimed = keys;
    },
    guard: 'EXISTS (SELECT 1 FROM w_seq)',
    p: (value: unknown) => `$${values.push(storable(value))}`,
    add: (sql: string, name = `w_${parts.length}`) => void parts.push(`${name} AS (${sql})`),
    sql: (final: string) => `WITH ${parts.join(',\n')}\n${final}`,
  };
}

/** Rows of column arrays for `unnest`: one array per column, `width` of them. */
function columns<T>(rows: readonly T[], pick: (row: T) => unknown[], width: number): unknown[][] {
  const out: unknown[][] = Array.from({ length: width }, () => []);
  for (const row of rows) pick(row).forEach((value, i) => (out[i] as unknown[]).push(value));
  return out;
}



