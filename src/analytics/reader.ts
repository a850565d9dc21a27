import type Database from 'better-sqlite3';
import { ValidationError } from '../errors/validation-error.ts';
import { atDatabase } from '../postgres/failure.ts';
import { openPool } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import { postgresNameSchema, type PostgresTarget, postgresTarget, stateStoreWhere } from '../postgres/target.ts';
import { openForReading } from '../read-database.ts';
import { postgresReaderStatements, sqliteReaderStatements } from './statements.ts';
import { type Dialect, POSTGRES, SQLITE } from './dialect.ts';

/**
 * A database that export, report and runs read: a pipeline's SQLite file, or a PostgreSQL database (its results
 * schema, and the state schema beside it), through the same few calls. Queries are written once, with `?` for
 * parameters; rows come back as SQLite gives them (times as ISO text, JSON as text), whichever database it is.
 */
export interface Reader {
  /** What to call it in messages: the file, or the URL without its password. */
  readonly label: string;
  readonly dialect: Dialect;
  /** A relation's name, quoted (and qualified in PostgreSQL): where results and their views live, or the run state. */
  name(relation: string, where?: 'results' | 'state'): string;
  exists(relation: string, where?: 'results' | 'state'): Promise<boolean>;
  all(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>;
  /** Rows in batches (a cursor in PostgreSQL, a statement's iterator in SQLite): memory stays flat. */
  iterate(sql: string, params?: readonly unknown[]): AsyncIterable<Record<string, unknown>>;
  /** A table's columns, and whether each holds integers. */
  columns(table: string): Promise<{ name: string; integer: boolean }[]>;
  /** The order rows were written in, for the items report. */
  readonly insertionOrder: string;
  close(): Promise<void>;
}

export interface ReaderOptions {
  /** PostgreSQL: the schema of the results table and its views (default `public`). */
  schema?: string | undefined;
  /** PostgreSQL: the schema of the run state (default `webdata`). */
  stateSchema?: string | undefined;
}

/** Whether a database argument names PostgreSQL: a `postgres://` URL, or `postgres:` (DATABASE_URL, libpq's variables). */
export const isPostgresDatabase = (database: string): boolean => /^postgres(ql)?:/i.test(database);

/**
 * Opens `database`: a `postgres://` URL, `postgres:` for DATABASE_URL or libpq's variables, or a SQLite file; or a
 * PostgreSQL target already resolved (a pipeline's state, which knows whether its file named the host).
 */
export async function openReader(database: string | PostgresTarget, options: ReaderOptions = {}, field = 'database'): Promise<Reader> {
  if (typeof database !== 'string') return postgresReader(database, options, field);
  if (isPostgresDatabase(database)) return postgresReader(postgresTarget(database === 'postgres:' || database === 'postgresql:' ? undefined : database), options, field);
  return sqliteReader(openForReading(database, field));
}

function sqliteReader(db: Database.Database): Reader {
  return {
    label: db.name,
    dialect: SQLITE,
    name: (relation) => quoteIdentifier(relation),
    exists: async (relation) => db.prepare(sqliteReaderStatements.relationExists).get(relation) !== undefined,
    all: async (sql, params = []) => db.prepare(sql).all(...params) as Record<string, unknown>[],
    async *iterate(sql, params = []) {
      yield* db.prepare(sql).iterate(...params) as IterableIterator<Record<string, unknown>>;
    },
    columns: async (table) =>
      (db.prepare(sqliteReaderStatements.tableColumns).all(table) as { name: string; type: string }[]).map((c) => ({ name: c.name, integer: c.type.toUpperCase().startsWith('INTEGER') })),
    insertionOrder: sqliteReaderStatements.insertionOrder,
    close: async () => void db.close(),
  };
}

const BATCH = 2000;

async function postgresReader(target: PostgresTarget, options: ReaderOptions, field: string): Promise<Reader> {
  const schemas = ValidationError.parse(postgresNameSchema.default('public'), options.schema, 'Invalid database', 'schema');
  const stateSchema = ValidationError.parse(postgresNameSchema.default('webdata'), options.stateSchema, 'Invalid database', 'stateSchema');
  // Two connections: one reads rows behind a cursor while the other looks things up.
  const pool = openPool(target, 2, { cursors: true });
  const where = target.sink === undefined ? target.label : stateStoreWhere(target);
  const explained = <T>(work: () => Promise<T>): Promise<T> => atDatabase(where, work, pool);
  const schemaOf = (at: 'results' | 'state' = 'results') => (at === 'results' ? schemas : stateSchema);
  const qualified = (relation: string, at?: 'results' | 'state') => `${quoteIdentifier(schemaOf(at))}.${quoteIdentifier(relation)}`;
  try {
    await explained(() => pool.query(postgresReaderStatements.ping));
  } catch (error) {
    await pool.end();
    if ((error as { problem?: string }).problem === 'invalid_path') throw new ValidationError('Invalid database', [{ path: field, message: (error as Error).message }]);
    throw error;
  }
  return {
    label: target.label,
    dialect: POSTGRES,
    name: qualified,
    // The name as a value (to_regclass parses it as a name, never runs it).
    exists: (relation, at) =>
      explained(async () => (await pool.query(postgresReaderStatements.relationExists, [qualified(relation, at)])).rows[0]?.found === true),
    all: (sql, params = []) => explained(async () => (await pool.query(numbered(sql), [...params])).rows.map(asSqlite)),
    async *iterate(sql, params = []) {
      const client = await explained(() => pool.connect());
      let broken: Error | undefined;
      try {
        await explained(() => client.query(postgresReaderStatements.begin));
        await explained(() => client.query(postgresReaderStatements.declareCursor(numbered(sql)), [...params]));
        for (;;) {
          const { rows } = await explained(() => client.query(postgresReaderStatements.fetch(BATCH)));
          if (rows.length === 0) break;
          for (const row of rows) yield asSqlite(row);
        }
        await explained(() => client.query(postgresReaderStatements.commit));
      } catch (error) {
        broken = error as Error;
        throw error;
      } finally {
        client.release(broken);
      }
    },
    columns: (table) =>
      explained(async () =>
        (
          await pool.query<{ name: string; type: string }>(postgresReaderStatements.tableColumns, [schemas, table])
        ).rows.map((c) => ({ name: c.name, integer: c.type === 'integer' || c.type === 'bigint' || c.type === 'smallint' })),
      ),
    insertionOrder: postgresReaderStatements.insertionOrder,
    close: () => pool.end(),
  };
}

/** `?` placeholders as PostgreSQL's `$1, $2, …` (the queries are ours: no `?` inside a literal). */
export function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** A row as SQLite would hand it over: times as ISO text, JSON values as text. */
function asSqlite(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [column, value] of Object.entries(row)) {
    out[column] = value instanceof Date ? value.toISOString() : typeof value === 'object' && value !== null ? JSON.stringify(value) : value;
  }
  return out;
}
