import { z } from 'zod';
import type { Page } from '../pipeline/page.ts';
import { ValidationError } from '../errors/validation-error.ts';
import type { HeldLock } from '../postgres/advisory-lock.ts';
import { atDatabase, retrying } from '../postgres/failure.ts';
import { onKnownSession, type Pool, type PoolClient, transaction } from '../postgres/pools.ts';
import { postgresNameSchema, type PostgresTarget, postgresTarget, postgresUrlSchema } from '../postgres/target.ts';
import { toJson } from '../json.ts';
import { addRows } from '../commits/postgres-rows.ts';
import { preparedQuery } from '../commits/prepared-statement.ts';
import { checkNormalized, checkUpsertTags, columnName, DEFAULT_COLUMNS, UPSERT_COLUMNS, UPSERT_KEY, upsertColumnsFree } from './columns.ts';
import type { OwnColumns } from './columns.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';
import { postgresValue } from './postgres-columns.ts';
import { storable } from '../postgres/storable.ts';
import { postgresOutcomes, preparePostgresOutcomes } from './postgres-outcomes.ts';
import { leaseTable, prepareTable, uniqueKey } from './postgres-table.ts';
import type { SeriesOutcome } from './series-outcomes.ts';
import type { TrackedRow } from './series-tracked.ts';
import { postgresTracked, preparePostgresTracked } from './postgres-tracked.ts';
import { tableMembers } from './table-sink.ts';
import type { PostgresRows, Sink, SinkContext } from './sink.ts';
import { postgresCheckpoints, postgresSinkStatements, upsertTarget } from './statements.ts';

/**
 * The longest name made from a table's: its view `<table>_report_rankings` (analytics/views.ts), longer than its
 * indexes' (`_series`, `_dedupe_key`, `_upsert_key`). PostgreSQL cuts every name at 63 bytes, and names cut alike are
 * one (a table of 55 characters had its four views collide): a table's name leaves room for it. The one longer name,
 * `<table>_report_tracked_latest`, may be cut: alike where it is made and where it is read, and, cut, it is still no
 * other's (`_report_tracked_` at the shortest; test/analytics/skipped-series.test.ts).
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

/**
 * Rows into a PostgreSQL table, exactly once: each page's rows and the sink's checkpoint commit in one transaction —
 * the state store's own page statement, when it lives in the same database, else a statement of the sink's own. Typed columns
 * (`timestamptz`, `integer`, `text`, `jsonb` for `raw`), one multi-row statement per page, the same modes as SQLite.
 */
export function toPostgres(options: PostgresSinkOptions & OwnColumns): Sink<object>;
export function toPostgres(options: PostgresSinkOptions): Sink<NormalizedItem>;
export function toPostgres(options: PostgresSinkOptions): Sink<Record<string, unknown>> {
  const config = ValidationError.parse(postgresSinkOptionsSchema.superRefine(upsertColumnsFree), options, 'Invalid PostgreSQL sink', 'postgres');
  const { schema, mode } = config;
  const target = postgresTarget(config.url, process.env, { namedBy: 'postgres.url' });
  const table = new PostgresTable(config, target);
  // What it says of its table is for the run (run/outputs.ts), not in the declared type: an intersection there made a
  // sink of the wrong items a wall of its members, where `Sink<A>` against `Sink<B>` says it.
  const sink: Sink<Record<string, unknown>> & PostgresSinkTable = {
    kind: 'postgres',
    path: `${target.label}#${schema}.${config.table}`,
    id: table.id,
    table: config.table,
    schema,
    target,
    terms: { database: target.database, schema, table: config.table, mode, columns: config.columns ?? 'default' },
    ...tableMembers(table, target.database),
    // The rows' `dedupe_key` is what a distributed run claims across workers: only a table that has it can follow.
    get claimsDedupeKeys() {
      return table.columns.includes('dedupe_key');
    },
  };
  return sink;
}

/** The table from `open` to `close`. */
interface OpenTable {
  pool: Pool;
  rows: ReturnType<typeof pageRows>;
  lease: Pick<HeldLock, 'release'>;
  /** A table with the default columns keeps how each series ended beside it (series-outcomes.ts). */
  outcomes: ReturnType<typeof postgresOutcomes> | undefined;
  /** And, when it tracks domains, their ranks (series-tracked.ts). */
  tracked: ReturnType<typeof postgresTracked> | undefined;
}

/** The PostgreSQL table behind the sink: where it is, its columns, the last page it holds, and the run that writes it. */
class PostgresTable {
  readonly id: string;
  readonly #config: z.output<typeof postgresSinkOptionsSchema>;
  readonly #target: PostgresTarget;
  /** What messages call it: the database (without its password) and the table. */
  readonly #where: string;
  /** Its own columns, or the normalized item's and the run's tag columns (known once the run opens it). */
  #columns: readonly string[];
  #opened: OpenTable | undefined;
  #pipeline = '';
  /** The sequence number of the last page the table holds. */
  #held = 0;

  constructor(config: z.output<typeof postgresSinkOptionsSchema>, target: PostgresTarget) {
    this.#config = config;
    this.#target = target;
    this.#where = `the PostgreSQL sink ${target.label}, table ${config.schema}.${config.table}`;
    this.#columns = config.columns ?? DEFAULT_COLUMNS;
    this.id = `postgres:${target.database}#${config.schema}.${config.table}`;
  }

  get columns(): readonly string[] {
    return this.#columns;
  }

  get held(): number {
    return this.#held;
  }

  async open(ctx: SinkContext): Promise<void> {
    const { schema, table, mode, columns: own } = this.#config;
    const where = this.#where;
    this.#pipeline = ctx.pipeline;
    const pool = ctx.postgres(this.#target);
    if (!own) this.#columns = [...DEFAULT_COLUMNS, ...ctx.tagColumns];
    const columns = this.#columns;
    if (mode === 'upsert') {
      if (!own) checkUpsertTags(ctx.tagColumns, 'Invalid PostgreSQL sink', 'postgres.mode');
      const lacking = UPSERT_KEY.filter((c) => !columns.includes(c));
      if (lacking.length > 0) throw new ValidationError('Invalid PostgreSQL sink', [{ path: 'postgres.columns', message: `upsert needs the key columns ${lacking.join(', ')}` }]);
    }
    const stored = mode === 'upsert' ? [...columns, ...UPSERT_COLUMNS] : columns;
    const lease = ctx.shared ? { release: async () => undefined } : await atDatabase(where, () => leaseTable(pool, `${this.#target.database}#${schema}.${table}`, where, ctx.pipeline), pool);
    const prepared = await this.#prepare(pool, ctx, stored).catch(async (error: unknown) => {
      await lease.release();
      throw error;
    });
    this.#held = prepared.seq;
    this.#opened = {
      pool,
      lease,
      rows: pageRows({ sinkId: this.id, schema, table, pipeline: this.#pipeline }, columns, { mode, conflictTarget: prepared.conflictTarget }),
      outcomes: own ? undefined : postgresOutcomes(pool, schema, table),
      tracked: own ? undefined : postgresTracked(pool, schema, table),
    };
  }

  /**
   * The table, its upsert key and outcomes table, created or checked in one transaction, and the last page it holds;
   * then the run's analytics views over it.
   */
  async #prepare(pool: Pool, ctx: SinkContext, stored: readonly string[]): Promise<{ seq: number; conflictTarget: string }> {
    const { schema, table, mode, columns: own } = this.#config;
    const where = this.#where;
    const prepared = await atDatabase(
      where,
      () =>
        transaction(pool, async (client) => {
          await prepareTable(client, { schema, table, where }, stored, ctx.tagColumns);
          const conflictTarget = mode === 'upsert' ? await uniqueKey(client, { schema, table }, where) : upsertTarget(false);
          if (!own) await preparePostgresOutcomes(client, schema, table, where, ctx.runId);
          if (!own && ctx.tracked) await preparePostgresTracked(client, schema, table);
          return { seq: (await this.#checkpoint(client)) ?? (await this.#firstCheckpoint(client, ctx.currentSeq)), conflictTarget };
        }),
      pool,
    );
    if (!own) await atDatabase(where, async () => ctx.resultsTable?.({ kind: 'postgres', pool, schema }, table, mode));
    return prepared;
  }

  rows(page: Page<Record<string, unknown>>): PostgresRows {
    if (!this.#config.columns) checkNormalized(page.items[0], `The PostgreSQL sink ${this.#where}`);
    return this.#ready().rows(page.items);
  }

  async writeAlone(rows: PostgresRows, seq: number): Promise<void> {
    const { pool } = this.#ready();
    await retrying(
      this.#where,
      async (attempt) => {
        // A lost answer: the checkpoint says whether the page went in, once the cut connection's session has ended
        // (`onKnownSession`): the statement is not guarded, and one still running would land beside the one sent again.
        if (attempt > 1 && ((await this.#checkpoint(pool)) ?? 0) >= seq) return;
        await onKnownSession({ pool, where: this.#where }, (client) => ownStatement(client, rows, seq));
      },
      { idempotent: true },
    );
  }

  committed(seq: number): void {
    this.#held = seq;
  }

  async outcomes(runId: string, outcomes: readonly SeriesOutcome[]): Promise<void> {
    const recorded = this.#ready().outcomes;
    if (recorded) await retrying(this.#where, () => recorded.record(runId, outcomes), { idempotent: true });
  }

  async tracked(runId: string, rows: readonly TrackedRow[]): Promise<void> {
    const recorded = this.#ready().tracked;
    if (recorded) await retrying(this.#where, () => recorded.record(runId, rows), { idempotent: true });
  }

  async discard(runId: string): Promise<void> {
    const { pool, outcomes, tracked } = this.#ready();
    const { schema, table, mode } = this.#config;
    const column = mode === 'upsert' ? 'first_run_id' : 'run_id';
    const rows = mode === 'upsert' || this.#columns.includes('run_id');
    await retrying(
      this.#where,
      () =>
        transaction(pool, async (client) => {
          if (rows) await client.query(postgresSinkStatements.discardRun(schema, table, column), [runId]);
          await outcomes?.discard(client, runId);
          await tracked?.discard(client, runId);
        }),
      { idempotent: true },
    );
  }

  async finish(runId: string): Promise<void> {
    const { pool, outcomes, tracked } = this.#ready();
    const { schema, table, mode } = this.#config;
    // replace: the run finished, so the rows of earlier runs give way to it, all at once, and so do their outcomes.
    if (mode === 'replace' && this.#columns.includes('run_id')) {
      await retrying(
        this.#where,
        () =>
          transaction(pool, async (client) => {
            await client.query(postgresSinkStatements.keepOnlyRun(schema, table), [runId]);
            await outcomes?.keepOnly(client, runId);
            await tracked?.keepOnly(client, runId);
          }),
        { idempotent: true },
      );
    }
  }

  async close(): Promise<void> {
    const lease = this.#opened?.lease;
    this.#opened = undefined;
    await lease?.release();
  }

  /** The last page the table holds, by its checkpoint; undefined before the sink's first run. */
  async #checkpoint(client: Pool | PoolClient): Promise<number | undefined> {
    const seq = (await client.query<{ seq: string }>(postgresSinkStatements.checkpoint(this.#config.schema), [this.#pipeline, this.id])).rows[0]?.seq;
    return seq === undefined ? undefined : Number(seq);
  }

  /** Seen for the first time: it holds nothing of the past, and owes nothing of it either. */
  async #firstCheckpoint(client: PoolClient, seq: number): Promise<number> {
    await client.query(postgresSinkStatements.addCheckpoint(this.#config.schema), [this.#pipeline, this.id, seq]);
    return seq;
  }

  #ready(): OpenTable {
    if (!this.#opened) throw new Error(`the PostgreSQL sink ${this.#where} was not opened`);
    return this.#opened;
  }
}

/**
 * A page's rows as the table takes them (`PostgresRows`): one array per column, typed as the table's, with the
 * upsert's conflict clause; the state store's page statement or the sink's own turns them into SQL (`addRows`).
 */
function pageRows(
  names: { sinkId: string; schema: string; table: string; pipeline: string },
  columns: readonly string[],
  { mode, conflictTarget }: { mode: 'append' | 'replace' | 'upsert'; conflictTarget: string },
) {
  const stored = mode === 'upsert' ? [...columns, ...UPSERT_COLUMNS] : columns;
  const fixed = {
    kind: 'postgres' as const,
    sinkId: names.sinkId,
    ...postgresSinkStatements.rows(names.schema, names.table, stored, mode === 'upsert' ? { target: conflictTarget } : undefined),
    keyColumn: stored.indexOf('dedupe_key'),
    checkpoint: { table: postgresCheckpoints(names.schema), pipeline: names.pipeline },
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
async function ownStatement(client: PoolClient, rows: PostgresRows, seq: number): Promise<void> {
  const parts: string[] = [];
  const values: unknown[] = [];
  addRows({ guard: 'true', p: (value) => `$${values.push(storable(value))}`, add: (sql) => void parts.push(sql) }, rows, seq);
  await client.query(preparedQuery(postgresSinkStatements.ownPage(parts), values));
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
