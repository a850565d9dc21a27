import { ValidationError } from '../../errors/validation-error.ts';
import { type Pool, transaction } from '../../postgres/pools.ts';
import { quoteIdentifier } from '../../sql-identifier.ts';
import { schemaStatements } from './statements.ts';

/**
 * The state tables in PostgreSQL, as migrations: each entry takes the schema from the version before it to its own
 * number, and is never edited once released (a new change is a new entry). `s` is the quoted schema name.
 * Every table a run writes carries the pipeline, so that many pipelines share one schema: the journal's sequence,
 * the checkpoints and the persistent dedupe keys are each pipeline's own. (SQL here rather than in statements.ts: a
 * migration is the history of the schema, read in order, not a statement the store sends by name.)
 */
export const MIGRATIONS: readonly ((s: string) => string)[] = [
  (s) => `
    CREATE TABLE ${s}.pipelines (pipeline text PRIMARY KEY, seq bigint NOT NULL DEFAULT 0);
    CREATE TABLE ${s}.runs (
      run_id text PRIMARY KEY,
      pipeline text NOT NULL,
      status text NOT NULL,
      started_at timestamptz NOT NULL,
      finished_at timestamptz,
      fingerprint text NOT NULL,
      plan text NOT NULL,
      budget double precision,
      summary text,
      error text,
      invocations integer NOT NULL DEFAULT 1,
      created bigint GENERATED ALWAYS AS IDENTITY
    );
    CREATE INDEX runs_pipeline ON ${s}.runs (pipeline, started_at);
    CREATE TABLE ${s}.series (
      run_id text NOT NULL,
      series_id text NOT NULL,
      endpoint text NOT NULL,
      query text NOT NULL,
      country text NOT NULL,
      lang text NOT NULL,
      status text NOT NULL,
      reason text,
      next_page integer,
      pages integer NOT NULL DEFAULT 0,
      items_served integer NOT NULL DEFAULT 0,
      items_written integer NOT NULL DEFAULT 0,
      duplicates integer NOT NULL DEFAULT 0,
      digest text,
      no_new integer NOT NULL DEFAULT 0,
      cursor text,
      state text,
      error text,
      error_kind text,
      PRIMARY KEY (run_id, series_id)
    );
    CREATE TABLE ${s}.pages (
      pipeline text NOT NULL,
      seq bigint NOT NULL,
      run_id text NOT NULL,
      page_key text NOT NULL,
      series_id text NOT NULL,
      number integer NOT NULL,
      meta text NOT NULL,
      output text NOT NULL,
      raw text,
      committed_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (pipeline, seq)
    );
    CREATE INDEX pages_run ON ${s}.pages (run_id, seq);
    CREATE TABLE ${s}.spend (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      run_id text NOT NULL,
      at timestamptz NOT NULL,
      series_id text NOT NULL,
      path text NOT NULL,
      attempt integer NOT NULL,
      status text NOT NULL,
      credits double precision NOT NULL,
      uncertain boolean NOT NULL,
      latency_ms double precision NOT NULL
    );
    CREATE INDEX spend_run ON ${s}.spend (run_id);
    CREATE TABLE ${s}.run_sinks (run_id text NOT NULL, sink_id text NOT NULL, start_seq bigint NOT NULL, start_bytes bigint, PRIMARY KEY (run_id, sink_id));
    CREATE TABLE ${s}.sink_checkpoints (
      pipeline text NOT NULL,
      sink_id text NOT NULL,
      seq bigint NOT NULL,
      bytes bigint,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (pipeline, sink_id)
    );
    CREATE TABLE ${s}.dedupe_keys (pipeline text NOT NULL, scope text NOT NULL, key text NOT NULL, run_id text, PRIMARY KEY (pipeline, scope, key));
    CREATE INDEX dedupe_keys_run ON ${s}.dedupe_keys (run_id) WHERE run_id IS NOT NULL;
    CREATE TABLE ${s}.sightings (
      run_id text NOT NULL,
      dedupe_key text NOT NULL,
      query text NOT NULL,
      country text NOT NULL,
      lang text NOT NULL,
      page integer NOT NULL,
      position integer NOT NULL,
      rank integer,
      fetched_at timestamptz NOT NULL,
      first boolean NOT NULL
    );
    CREATE INDEX sightings_key ON ${s}.sightings (dedupe_key);
    CREATE INDEX sightings_run ON ${s}.sightings (run_id);
    CREATE TABLE ${s}.leases (pipeline text PRIMARY KEY, holder text NOT NULL, pid integer NOT NULL, host text NOT NULL, acquired_at timestamptz NOT NULL);
  `,
  // 2: distributed runs (docs/design.md#past-one-machine) — the workers of a run, and the rate and budget they share.
  // Times are the database's (clock_timestamp()), so that machines with skewed clocks pace to one clock.
  (s) => `
    CREATE TABLE ${s}.workers (
      run_id text NOT NULL,
      worker_id text NOT NULL,
      host text NOT NULL,
      pid integer NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      stopped_at timestamptz,
      status text NOT NULL DEFAULT 'working',
      leader boolean NOT NULL DEFAULT false,
      pages integer NOT NULL DEFAULT 0,
      credits double precision NOT NULL DEFAULT 0,
      reserved double precision NOT NULL DEFAULT 0,
      PRIMARY KEY (run_id, worker_id)
    );
    CREATE TABLE ${s}.run_limits (
      run_id text PRIMARY KEY,
      planned boolean NOT NULL DEFAULT false,
      stop_reason text,
      stop_message text,
      budget double precision,
      spent double precision NOT NULL DEFAULT 0,
      uncertain double precision NOT NULL DEFAULT 0,
      reserved double precision NOT NULL DEFAULT 0,
      interval_ms double precision NOT NULL DEFAULT 0,
      next_at timestamptz NOT NULL DEFAULT '-infinity',
      paused_until timestamptz NOT NULL DEFAULT '-infinity',
      accepted bigint NOT NULL DEFAULT 0,
      rejected bigint NOT NULL DEFAULT 0,
      rejected_sent_at timestamptz
    );
  `,
  // 3: stage states as a snapshot (series.state) and what each page changed after it, in journal order.
  (s) => `
    CREATE TABLE ${s}.series_state (
      run_id text NOT NULL,
      series_id text NOT NULL,
      seq bigint NOT NULL,
      changes text NOT NULL,
      PRIMARY KEY (run_id, series_id, seq)
    );
  `,
  // 4: spend of answers whose pages never committed (paid all the same), marked apart.
  (s) => `
    ALTER TABLE ${s}.spend ADD COLUMN uncommitted boolean NOT NULL DEFAULT false;
  `,
  // 5: what else decides a run's money and rows (credit weights, stages, sinks, rate, budget: run/run-terms.ts), as
  // JSON, compared when a worker joins or a run resumes; null for runs recorded before.
  (s) => `
    ALTER TABLE ${s}.runs ADD COLUMN terms text;
  `,
  // 6: notifications of runs' ends (docs/notifications.md), one per run end and webhook: pending, with the body it
  // sends, until delivered or given up. The webhook is a hash of its URL, the target its origin and path.
  (s) => `
    CREATE TABLE ${s}.notifications (
      run_id text NOT NULL,
      invocation integer NOT NULL,
      webhook text NOT NULL,
      pipeline text NOT NULL,
      target text NOT NULL,
      event text NOT NULL,
      status text NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      error text,
      body text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (run_id, invocation, webhook)
    );
    CREATE INDEX notifications_pending ON ${s}.notifications (pipeline, created_at) WHERE status = 'pending';
  `,
  // 7: a schedule's occurrences, one row per (pipeline, due time), each claimed once by one worker of the fleet
  // (docs/design.md#schedules).
  (s) => `
    CREATE TABLE ${s}.occurrences (
      pipeline text NOT NULL,
      due_at timestamptz NOT NULL,
      outcome text NOT NULL,
      run_id text,
      worker text,
      claimed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      note text,
      PRIMARY KEY (pipeline, due_at)
    );
    CREATE INDEX occurrences_run ON ${s}.occurrences (run_id) WHERE run_id IS NOT NULL;
  `,
  // 8: a pool of keys in a distributed run (docs/distributed.md#a-pool-of-keys-across-workers): each key's own pacer
  // (as run_limits' for one key), its share of the credits across the workers, and its retirements (a 401: for the
  // run; a 402 or 403: for the endpoints in retired_paths), which every worker reads with its next slot of that key.
  // A run with one key keeps its run_limits row alone. `fingerprint`: the key a label stands for in the run (the first
  // worker's), so that a worker holding another key under it is refused.
  (s) => `
    CREATE TABLE ${s}.run_key_limits (
      run_id text NOT NULL,
      label text NOT NULL,
      interval_ms double precision NOT NULL DEFAULT 0,
      next_at timestamptz NOT NULL DEFAULT '-infinity',
      paused_until timestamptz NOT NULL DEFAULT '-infinity',
      accepted bigint NOT NULL DEFAULT 0,
      rejected bigint NOT NULL DEFAULT 0,
      rejected_sent_at timestamptz,
      max_credits double precision,
      spent double precision NOT NULL DEFAULT 0,
      reserved double precision NOT NULL DEFAULT 0,
      retired_reason text,
      retired_message text,
      retired_at timestamptz,
      retired_paths jsonb NOT NULL DEFAULT '{}',
      fingerprint text,
      PRIMARY KEY (run_id, label)
    );
  `,
  // 9: what keys learned of the server's limits (docs/scheduler.md#a-remembered-start), by the key's fingerprint under
  // the schema's own secret (meta, 'key_secret') and the API's origin and path: never a key. The schema's, not a
  // pipeline's: the next run of any pipeline with the key starts there.
  (s) => `
    CREATE TABLE ${s}.meta (key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE ${s}.key_limits (
      fingerprint text NOT NULL,
      api text NOT NULL,
      rate double precision NOT NULL,
      above double precision,
      learned_at timestamptz NOT NULL,
      PRIMARY KEY (fingerprint, api)
    );
  `,
  // 10: keys' allowances (docs/credits.md#allowances), the schema's like key_limits: the credits a key may spend a day
  // or a month, by its fingerprint, as the pipeline that declared it last recorded it (with the label it gives the
  // key), binding every pipeline of the schema; the credits each process holds of one for the period it is in, until
  // the ledger takes them over with their spend rows or they are given back (a hold whose holder stopped renewing it
  // expires: `expires_at`, the server's clock); and spend by key and period (null in rows written before).
  (s) => `
    CREATE TABLE ${s}.key_allowances (
      fingerprint text PRIMARY KEY,
      credits bigint NOT NULL,
      per text NOT NULL,
      timezone text NOT NULL,
      pipeline text NOT NULL,
      label text NOT NULL,
      declared_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE ${s}.key_holds (
      fingerprint text NOT NULL,
      period text NOT NULL,
      holder text NOT NULL,
      pipeline text NOT NULL,
      run_id text NOT NULL,
      credits double precision NOT NULL,
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (fingerprint, period, holder)
    );
    ALTER TABLE ${s}.spend ADD COLUMN key_fingerprint text, ADD COLUMN key_label text, ADD COLUMN pipeline text, ADD COLUMN period text;
    CREATE INDEX spend_key_period ON ${s}.spend (key_fingerprint, period, credits) WHERE period IS NOT NULL;
  `,
  // 11: the day each request's spend falls on, on the clocks of its key's allowance (UTC: none), which webdata_spend
  // groups by (docs/credits.md#where-the-credits-went); written with the row, as SQLite's is (null in rows before).
  (s) => `ALTER TABLE ${s}.spend ADD COLUMN day text;`,
  // 12: when the latest answers the followers got accepted were sent (epoch ms, the database's clock; the latest
  // ACCEPTED_SENT_KEPT, newest last) and how many were ever added, on the run's and the keys' rows of shared limits: the
  // leader learns from when the others' requests left, not from when it heard of them (docs/distributed-design.md#one-rate-shared).
  (s) => `
    ALTER TABLE ${s}.run_limits ADD COLUMN accepted_sent float8[] NOT NULL DEFAULT '{}', ADD COLUMN accepted_sent_count bigint NOT NULL DEFAULT 0;
    ALTER TABLE ${s}.run_key_limits ADD COLUMN accepted_sent float8[] NOT NULL DEFAULT '{}', ADD COLUMN accepted_sent_count bigint NOT NULL DEFAULT 0;
  `,
  // 13: the pages of a series whose refused dedupe claims were taken off its counts, so that the statement that does it
  // applies once however often it is sent (docs/distributed.md#dedupe-across-series); null: none.
  (s) => `ALTER TABLE ${s}.series ADD COLUMN refused_pages integer[];`,
];

/** The schema version this webdata-etl writes. */
export const POSTGRES_STATE_VERSION = MIGRATIONS.length;

/**
 * Creates the schema and brings it to this version, once, however many processes start together: the migrations
 * run in one transaction under an advisory lock. A schema already at this version is found by one read, without the
 * lock or a transaction (every worker of a fleet opens the store; only the first to reach a new database migrates,
 * and the others would queue behind its lock to find nothing to do: docs/benchmarks.md's start-up). A version table
 * committed at this version has every table of it: a migration's rows commit with its DDL. A schema of a newer
 * webdata-etl is refused before anything changes. Returns the version found before (0: a new schema).
 */
export async function migrate(pool: Pool, schema: string, label: string): Promise<number> {
  const s = quoteIdentifier(schema);
  const sql = schemaStatements(s);
  const current = await versionFound(pool, sql.version);
  if (current !== undefined && current >= POSTGRES_STATE_VERSION) return checkedVersion(current, schema, label);
  return transaction(pool, async (client) => {
    await client.query(sql.lock, [`webdata-etl:migrate:${schema}`]);
    const exists = (await client.query(sql.schemaExists, [schema])).rowCount === 1;
    if (!exists) await client.query(sql.createSchema);
    await client.query(sql.versionTable);
    const { rows } = await client.query<{ version: number | null }>(sql.version);
    const found = checkedVersion(rows[0]?.version ?? 0, schema, label);
    for (let version = found + 1; version <= POSTGRES_STATE_VERSION; version++) {
      await client.query((MIGRATIONS[version - 1] as (s: string) => string)(s));
      await client.query(sql.applied, [version]);
    }
    return found;
  });
}

/**
 * The version the schema records, read outside any transaction; undefined where there is no schema or version table
 * yet, or the role may not read it (SQLSTATE classes 42 and 3F): the locked path then finds out, and says why.
 */
async function versionFound(pool: Pool, statement: string): Promise<number | undefined> {
  try {
    const { rows } = await pool.query<{ version: number | null }>(statement);
    return rows[0]?.version ?? undefined;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && (code.startsWith('42') || code.startsWith('3F'))) return undefined;
    throw error;
  }
}

function checkedVersion(found: number, schema: string, label: string): number {
  if (found > POSTGRES_STATE_VERSION) {
    throw new ValidationError('Invalid state store', [
      {
        path: 'state.url',
        message: `${label}, schema "${schema}", holds state written by a newer webdata-etl (state schema ${found}; this one knows ${POSTGRES_STATE_VERSION}): upgrade webdata-etl, or give the pipeline another state.schema`,
      },
    ]);
  }
  return found;
}
