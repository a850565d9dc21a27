import { LeaseHeldError } from '../errors/lease-held-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { type HeldLock, tryAdvisoryLock } from '../postgres/advisory-lock.ts';
import type { Pool, PoolClient } from '../postgres/pools.ts';
import { postgresCheckpoints, postgresSinkStatements as sql, postgresTable, upsertTarget } from './statements.ts';

/** A PostgreSQL sink's table, and what messages call it. */
interface TableNames {
  schema: string;
  table: string;
  where: string;
}

/**
 * The schema, the table and the checkpoints table, created when missing. Existence is looked up first: PostgreSQL
 * checks the CREATE privilege before IF NOT EXISTS, so a role that may only write an existing table still can.
 */
export async function prepareTable(client: PoolClient, names: TableNames, columns: readonly string[], addable: readonly string[]): Promise<void> {
  const { schema, table, where } = names;
  const schemaExists = (await client.query(sql.schemaExists, [schema])).rowCount === 1;
  if (!schemaExists) await client.query(sql.createSchema(schema));
  const existing = (await client.query<{ name: string }>(sql.tableColumns, [schema, table])).rows.map((r) => r.name);
  if (existing.length > 0) {
    // Tag columns are the query list's to choose: a new one is added to the table, empty for earlier rows.
    for (const column of addable.filter((c) => !existing.includes(c))) {
      await client.query(sql.addColumn(schema, table, column));
      existing.push(column);
    }
    const missing = columns.filter((c) => !existing.includes(c));
    if (missing.length > 0) {
      throw new ValidationError(`The table ${schema}.${table} has other columns`, [
        { path: 'postgres.table', message: `it lacks ${missing.join(', ')} (it has ${existing.join(', ')}): use another table, or the same columns (${where})` },
      ]);
    }
  } else {
    await client.query(sql.createTable(schema, table, columns));
    // A hash index has no size limit (a B-tree entry's is 2,704 bytes, which a long query passes): lookups and joins by
    // query, whatever its length.
    if (columns.includes('query')) await client.query(sql.seriesIndex(schema, table));
    if (columns.includes('dedupe_key')) await client.query(sql.dedupeKeyIndex(schema, table));
  }
  if (['query', 'country', 'lang', 'run_id'].every((c) => columns.includes(c))) await seriesRunsIndex(client, schema, table);
  const checkpointsExist = (await client.query(sql.relationExists, [postgresCheckpoints(schema)])).rows[0]?.t !== null;
  if (!checkpointsExist) await client.query(sql.createCheckpoints(schema));
}

/**
 * The series index the views walk (`seriesRunsIndex`), made on a table made before it too, as a run opens it (a year of
 * 3.65 million rows: see docs/benchmarks.md#a-year-on-one-database). Looked up first: a role that may write the table
 * but not own it cannot make an index (42501), and its views then read the table as they did (`seriesRunsIndexed`).
 * Two runs opening the table at once (workers of a distributed run) both make it: the second waits on the first's name
 * in the catalog, then is refused it (23505) and finds it made.
 */
async function seriesRunsIndex(client: PoolClient, schema: string, table: string): Promise<void> {
  if ((await client.query(sql.seriesRunsIndexed, [schema, table])).rowCount === 1) return;
  await client.query(sql.savepoint);
  try {
    await client.query(sql.seriesRunsIndex(schema, table));
    await client.query(sql.releaseSavepoint);
  } catch (error) {
    if (!['42501', '23505'].includes((error as { code?: string }).code ?? '')) throw error;
    await client.query(sql.rollbackSavepoint);
  }
}

/**
 * The upsert's unique index, created when missing, and the conflict target that names it. A new table's index takes
 * the query's digest (a long query passes a B-tree entry's 2,704 bytes; the dedupe key is bounded already); a table
 * made by an earlier webdata-etl keeps its index on the query itself.
 */
export async function uniqueKey(client: PoolClient, names: { schema: string; table: string }, where: string): Promise<string> {
  const { schema, table } = names;
  try {
    await client.query(sql.savepoint);
    await client.query(sql.upsertKeyIndex(schema, table));
    await client.query(sql.releaseSavepoint);
    const definition = (await client.query<{ def: string }>(sql.indexDefinition, [schema, `${table}_upsert_key`])).rows[0]?.def ?? '';
    return upsertTarget(definition.includes('md5('));
  } catch (error) {
    if ((error as { code?: string }).code !== '23505') throw error;
    throw new ValidationError(`The table ${postgresTable(schema, table)} cannot take upserts`, [
      { path: 'postgres.mode', message: `it holds several rows per (query, country, lang, dedupe_key) — written in append mode? Use another table for upsert (${where})` },
    ]);
  }
}

/** One writer per table at a time, whichever pipeline or machine: an advisory lock for the run's length. */
export async function leaseTable(pool: Pool, key: string, where: string, pipeline: string): Promise<HeldLock> {
  const lock = await tryAdvisoryLock(pool, `webdata-etl:table:${key}`);
  if (lock) return lock;
  throw new LeaseHeldError(`${where} is being written by another run (of pipeline "${pipeline}" or another): one writer per table at a time. Wait for it to finish, or write to another table.`, {
    pipeline: 'unknown',
    pid: 0,
    host: 'unknown',
    since: 'unknown',
  });
}
