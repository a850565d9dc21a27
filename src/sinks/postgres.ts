import { z } from 'zod';
import { LeaseHeldError } from '../errors/lease-held-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { type HeldLock, tryAdvisoryLock } from '../postgres/advisory-lock.ts';
import { atDatabase, retrying } from '../postgres/failure.ts';
import { type Pool, type PoolClient, transaction } from '../postgres/pools.ts';
import { quoteIdentifier as q } from '../sql-identifier.ts';
import { postgresNameSchema, type PostgresTarget, postgresTarget, postgresUrlSchema } from '../postgres/target.ts';
import { toJson } from '../json.ts';
import { addRows } from '../commits/postgres-rows.ts';
import { preparedQuery } from '../commits/prepared-statement.ts';
import { checkNormalized, checkUpsertTags, columnName, DEFAULT_COLUMNS, UPSERT_COLUMNS, UPSERT_KEY, upsertColumnsFree } from './columns.ts';
import type { OwnColumns } from './columns.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';
import { postgresColumnType, postgresValue } from './postgres-columns.ts';
import { storable } from '../postgres/storable.ts';
import { postgresOutcomes, preparePostgresOutcomes } from './postgres-outcomes.ts';
import type { PostgresRows, Sink, SinkContext } from './sink.ts';

/**
 * The longest name made from a table's: its view `<table>_report_rankings` (analytics/views.ts), longer than its
 * indexes' (`_series`, `_dedupe_key`, `_upsert_key`). PostgreSQL cuts every name at 63 bytes, and names cut alike are
 * one (a table of 55 characters had its four views collide): a table's name leaves room for it.
 */
const LONGEST_DERIVED = '_report_rankings';
export const MAX_POSTGRES_TABLE = 63 - LONGEST_DERIVED.length;

export const postgresSinkOptionsSchema = z.strictObject({
  table: postgresNameSchema.max(MAX_POSTGRES_TABLE, {
    error: `must be at most ${MAX_POSTGRES_TABLE} characters: PostgreSQL cuts names at 63 bytes, and the table's views are named <table>${LONGEST_DERIVED} and so on`,
  }),
  /** The database; default DATABASE_URL, else libpq's variables (PGHOST, PGUSER, PGPASSWORD, PGDATABASE, PGPORT, PGSSLMODE). */
  url: postgresUrlSchema.optional(),
  /** Where the table (and the sink's checkpoints) live; created when missing. */
  schema: postgresNameSchema.default('public'),
  /** Columns, in order (default: the normalized item's). */
  columns: z.array(columnName).min(1).optional(),
  /** The same three modes as the SQLite sink's (see `toSqlite`). */
  mode: z.enum(['append', 'replace', 'upsert'], { error: 'must be append, replace or upsert' }).default('append'),
});

export type PostgresSinkOptions = z.input<typeof postgresSinkOptionsSchema>;

/** What a PostgreSQL sink says of its table, beside being a sink. */
export interface PostgresSinkTable {
  readonly table: string;
  readonly schema: string;
  readonly target: PostgresTarget;
}

/** The upsert key as a new table indexes it (see `uniqueKey`). */
const UPSERT_TARGET = 'md5(query), country, lang, dedupe_key';

interface Opened {
  pool: Pool;
  rows: ReturnType<typeof pageRows>;
  lease: Pick<HeldLock, 'release'>;
  /** A table with the default columns keeps how each series ended beside it (series-outcomes.ts). */
  outcomes: ReturnType<typeof postgresOutcomes> | undefined;
}

/**
 * Rows into a PostgreSQL table, exactly once: each page's rows and the sink's checkpoint commit in one transaction —
 * the state store's own page statement, when it lives in the same database, else a statement of the sink's own. Typed columns
 * (`timestamptz`, `integer`, `text`, `jsonb` for `raw`), one multi-row statement per page, the same modes as SQLite.
 */
export function toPostgres(options: PostgresSinkOptions & OwnColumns): Sink<object>;
export function toPostgres(options: PostgresSinkOptions): Sink<NormalizedItem>;
export function toPostgres(options: PostgresSinkOptions): Sink<Record<string, unknown>> {
  const config = ValidationError.parse(postgresSinkOptionsSchema.superRefine(upsertColumnsFree), options, 'Invalid PostgreSQL sink', 'postgres');
  const { table, schema, mode } = config;
  const target = postgresTarget(config.url, process.env, { namedBy: 'postgres.url' });
  const where = `the PostgreSQL sink ${target.label}, table ${schema}.${table}`;
  const qualified = `${q(schema)}.${q(table)}`;
  const checkpointTable = `${q(schema)}.webdata_checkpoints`;
  const id = `postgres:${target.database}#${schema}.${table}`;
  let columns: readonly string[] = config.columns ?? DEFAULT_COLUMNS;
  let opened: Opened | undefined;
  let pipeline = '';
  let conflictTarget = UPSERT_KEY.map(q).join(', ');
  let held = 0;

  /** The last page the table holds, by its checkpoint; undefined before the sink's first run. */
  const checkpointOf = async (client: Pool | PoolClient): Promise<number | undefined> => {
    const seq = (await client.query<{ seq: string }>(`SELECT seq FROM ${checkpointTable} WHERE pipeline = $1 AND sink_id = $2`, [pipeline, id])).rows[0]?.seq;
    return seq === undefined ? undefined : Number(seq);
  };
  const ready = () => {
    if (!opened) throw new Error(`the PostgreSQL sink ${where} was not opened`);
    return opened;
  };

  // What it says of its table is for the run (run/outputs.ts), not in the declared type: an intersection there made a
  // sink of the wrong items a wall of its members, where `Sink<A>` against `Sink<B>` says it.
  const sink: Sink<Record<string, unknown>> & PostgresSinkTable = {
    kind: 'postgres',
    path: `${target.label}#${schema}.${table}`,
    id,
    table,
    schema,
    target,
    terms: { database: target.database, schema, table, mode, columns: config.columns ?? 'default' },
    commits: {
      kind: 'rows',
      database: target.database,
      rows(page) {
        if (!config.columns) checkNormalized(page.items[0], `The PostgreSQL sink ${where}`);
        return ready().rows(page.items);
      },
      async writeAlone(rows, seq) {
        const { pool } = ready();
        await retrying(
          where,
          async (attempt) => {
            // A lost answer: the checkpoint says whether the page went in.
            if (attempt > 1 && ((await checkpointOf(pool)) ?? 0) >= seq) return;
            await ownStatement(pool, rows as PostgresRows, seq);
          },
          { idempotent: true },
        );
      },
      committed(seq) {
        held = seq;
      },
    },
    async open(ctx: SinkContext) {
      pipeline = ctx.pipeline;
      const pool = ctx.postgres(target);
      if (!config.columns) columns = [...DEFAULT_COLUMNS, ...ctx.tagColumns];
      if (mode === 'upsert') {
        if (!config.columns) checkUpsertTags(ctx.tagColumns, 'Invalid PostgreSQL sink', 'postgres.mode');
        const lacking = UPSERT_KEY.filter((c) => !columns.includes(c));
        if (lacking.length > 0) throw new ValidationError('Invalid PostgreSQL sink', [{ path: 'postgres.columns', message: `upsert needs the key columns ${lacking.join(', ')}` }]);
      }
      const stored = mode === 'upsert' ? [...columns, ...UPSERT_COLUMNS] : columns;
      const lease = ctx.shared ? { release: async () => undefined } : await atDatabase(where, () => leaseTable(pool, `${target.database}#${schema}.${table}`, where, ctx.pipeline), pool);
      try {
        held = await atDatabase(where, () =>
          transaction(pool, async (client) => {
            await prepareTable(client, { schema, table, qualified, checkpointTable, where }, stored, ctx.tagColumns);
            if (mode === 'upsert') conflictTarget = await uniqueKey(client, { schema, table, qualified }, where);
            if (!config.columns) await preparePostgresOutcomes(client, schema, table, where, ctx.runId);
            const seq = await checkpointOf(client);
            if (seq !== undefined) return seq;
            // Seen for the first time: it holds nothing of the past, and owes nothing of it either.
            await client.query(`INSERT INTO ${checkpointTable} (pipeline, sink_id, seq) VALUES ($1, $2, $3)`, [pipeline, id, ctx.currentSeq]);
            return ctx.currentSeq;
          }),
          pool,
        );
        if (!config.columns) await atDatabase(where, async () => ctx.resultsTable?.({ kind: 'postgres', pool, schema }, table, mode));
      } catch (error) {
        await lease.release();
        throw error;
      }
      opened = {
        pool,
        lease,
        rows: pageRows({ sinkId: id, qualified, checkpointTable, pipeline }, columns, { mode, conflictTarget }),
        outcomes: config.columns ? undefined : postgresOutcomes(pool, schema, table),
      };
    },
    // The rows' `dedupe_key` is what a distributed run claims across workers: only a table that has it can follow.
    get claimsDedupeKeys() {
      return columns.includes('dedupe_key');
    },
    held: () => held,
    async outcomes(runId, outcomes) {
      const recorded = ready().outcomes;
      if (recorded) await retrying(where, () => recorded.record(runId, outcomes), { idempotent: true });
    },
    async discard(runId) {
      const { pool, outcomes } = ready();
      const column = mode === 'upsert' ? 'first_run_id' : 'run_id';
      const rows = mode === 'upsert' || columns.includes('run_id');
      await retrying(
        where,
        () =>
          transaction(pool, async (client) => {
            if (rows) await client.query(`DELETE FROM ${qualified} WHERE ${q(column)} = $1`, [runId]);
            await outcomes?.discard(client, runId);
          }),
        { idempotent: true },
      );
    },
    async finish(runId) {
      const { pool, outcomes } = ready();
      // replace: the run finished, so the rows of earlier runs give way to it, all at once, and so do their outcomes.
      if (mode === 'replace' && columns.includes('run_id')) {
        await retrying(
          where,
          () =>
            transaction(pool, async (client) => {
              await client.query(`DELETE FROM ${qualified} WHERE run_id <> $1`, [runId]);
              await outcomes?.keepOnly(client, runId);
            }),
          { idempotent: true },
        );
      }
    },
    async close() {
      const lease = opened?.lease;
      opened = undefined;
      await lease?.release();
    },
  };
  return sink;
}

/**
 * A page's rows as the table takes them (`PostgresRows`): one array per column, typed as the table's, with the
 * upsert's conflict clause; the state store's page statement or the sink's own turns them into SQL (`addRows`).
 */
function pageRows(
  names: { sinkId: string; qualified: string; checkpointTable: string; pipeline: string },
  columns: readonly string[],
  { mode, conflictTarget }: { mode: 'append' | 'replace' | 'upsert'; conflictTarget: string },
) {
  const stored = mode === 'upsert' ? [...columns, ...UPSERT_COLUMNS] : columns;
  const types = stored.map((c) => postgresColumnType(c).replace(/ NOT NULL$/, ''));
  const updated = stored.filter((c) => !UPSERT_KEY.includes(c) && c !== 'first_seen' && c !== 'first_run_id');
  const conflict = mode === 'upsert' ? ` ON CONFLICT (${conflictTarget}) DO UPDATE SET ${updated.map((c) => `${q(c)} = excluded.${q(c)}`).join(', ')}` : '';
  const fixed = {
    kind: 'postgres' as const,
    sinkId: names.sinkId,
    table: names.qualified,
    columns: stored.map(q).join(', '),
    types,
    keyColumn: stored.indexOf('dedupe_key'),
    conflict,
    checkpoint: { table: names.checkpointTable, pipeline: names.pipeline },
  };
  return (pageItems: readonly Record<string, unknown>[]): PostgresRows => {
    // One row per key in a statement (PostgreSQL refuses to update a row twice in one): the last of a page wins, as
    // it would row by row.
    const items = mode === 'upsert' ? lastPerKey(pageItems) : pageItems;
    const arrays = stored.map(() => [] as unknown[]);
    for (const item of items) {
      const values = mode === 'upsert' ? [...columns.map((c) => item[c]), item.fetched_at, item.fetched_at, item.run_id] : columns.map((c) => item[c]);
      values.forEach((value, i) => (arrays[i] as unknown[]).push(postgresValue(stored[i] as string, value)));
    }
    return { ...fixed, arrays };
  };
}

/**
 * The rows and the checkpoint as a statement of the sink's own (a database other than the state's, or a replay):
 * data-modifying CTEs, one round trip, atomic on its own.
 */
async function ownStatement(pool: Pool, rows: PostgresRows, seq: number): Promise<void> {
  const parts: string[] = [];
  const values: unknown[] = [];
  addRows({ guard: 'true', p: (value) => `$${values.push(storable(value))}`, add: (sql) => void parts.push(sql) }, rows, seq);
  // The last part is the statement; the others go before it as CTEs (a page with no rows has none: no WITH).
  const before = parts.slice(0, -1).map((sql, i) => `w_${i} AS (${sql})`);
  await pool.query(preparedQuery(`${before.length > 0 ? `WITH ${before.join(', ')} ` : ''}${parts.at(-1)}`, values));
}

function lastPerKey(items: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  const byKey = new Map<string, Record<string, unknown>>();
  const out: Record<string, unknown>[] = [];
  for (const item of items) {
    if (item.dedupe_key === null || item.dedupe_key === undefined) out.push(item);
    else byKey.set(toJson([item.query, item.country, item.lang, item.dedupe_key]), item);
  }
  return [...out, ...byKey.values()];
}

interface TableNames {
  schema: string;
  table: string;
  qualified: string;
  checkpointTable: string;
  where: string;
}

/**
 * The schema, the table and the checkpoints table, created when missing. Existence is looked up first: PostgreSQL
 * checks the CREATE privilege before IF NOT EXISTS, so a role that may only write an existing table still can.
 */
async function prepareTable(client: PoolClient, names: TableNames, columns: readonly string[], addable: readonly string[]): Promise<void> {
  const { schema, table, qualified, checkpointTable, where } = names;
  const schemaExists = (await client.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [schema])).rowCount === 1;
  if (!schemaExists) await client.query(`CREATE SCHEMA IF NOT EXISTS ${q(schema)}`);
  const existing = (
    await client.query<{ name: string }>(`SELECT column_name AS name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, [schema, table])
  ).rows.map((r) => r.name);
  if (existing.length > 0) {
    // Tag columns are the query list's to choose: a new one is added to the table, empty for earlier rows.
    for (const column of addable.filter((c) => !existing.includes(c))) {
      await client.query(`ALTER TABLE ${qualified} ADD COLUMN IF NOT EXISTS ${q(column)} text`);
      existing.push(column);
    }
    const missing = columns.filter((c) => !existing.includes(c));
    if (missing.length > 0) {
      throw new ValidationError(`The table ${schema}.${table} has other columns`, [
        { path: 'postgres.table', message: `it lacks ${missing.join(', ')} (it has ${existing.join(', ')}): use another table, or the same columns (${where})` },
      ]);
    }
  } else {
    await client.query(`CREATE TABLE IF NOT EXISTS ${qualified} (${columns.map((c) => `${q(c)} ${postgresColumnType(c)}`).join(', ')})`);
    // A hash index has no size limit (a B-tree entry's is 2,704 bytes, which a long query passes): lookups and joins by
    // query, whatever its length.
    if (columns.includes('query')) await client.query(`CREATE INDEX IF NOT EXISTS ${q(`${table}_series`)} ON ${qualified} USING hash (query)`);
    if (columns.includes('dedupe_key')) await client.query(`CREATE INDEX IF NOT EXISTS ${q(`${table}_dedupe_key`)} ON ${qualified} (dedupe_key)`);
  }
  const checkpointsExist = (await client.query(`SELECT to_regclass($1) AS t`, [checkpointTable])).rows[0]?.t !== null;
  if (!checkpointsExist) {
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${checkpointTable} (pipeline text NOT NULL, sink_id text NOT NULL, seq bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (pipeline, sink_id))`,
    );
  }
}

/**
 * The upsert's unique index, created when missing, and the conflict target that names it. A new table's index takes
 * the query's digest (a long query passes a B-tree entry's 2,704 bytes; the dedupe key is bounded already); a table
 * made by an earlier webdata-etl keeps its index on the query itself.
 */
async function uniqueKey(client: PoolClient, names: { schema: string; table: string; qualified: string }, where: string): Promise<string> {
  const { schema, table, qualified } = names;
  const index = `${table}_upsert_key`;
  try {
    await client.query('SAVEPOINT unique_key');
    await client.query(`CREATE UNIQUE INDEX IF NOT EXISTS ${q(index)} ON ${qualified} (${UPSERT_TARGET})`);
    await client.query('RELEASE SAVEPOINT unique_key');
    const definition = (await client.query<{ def: string }>(`SELECT indexdef AS def FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`, [schema, index])).rows[0]?.def ?? '';
    return definition.includes('md5(') ? UPSERT_TARGET : UPSERT_KEY.map(q).join(', ');
  } catch (error) {
    if ((error as { code?: string }).code !== '23505') throw error;
    throw new ValidationError(`The table ${qualified} cannot take upserts`, [
      { path: 'postgres.mode', message: `it holds several rows per (query, country, lang, dedupe_key) — written in append mode? Use another table for upsert (${where})` },
    ]);
  }
}

/** One writer per table at a time, whichever pipeline or machine: an advisory lock for the run's length. */
async function leaseTable(pool: Pool, key: string, where: string, pipeline: string): Promise<HeldLock> {
  const lock = await tryAdvisoryLock(pool, `webdata-etl:table:${key}`);
  if (lock) return lock;
  throw new LeaseHeldError(`${where} is being written by another run (of pipeline "${pipeline}" or another): one writer per table at a time. Wait for it to finish, or write to another table.`, {
    pipeline: 'unknown',
    pid: 0,
    host: 'unknown',
    since: 'unknown',
  });
}
