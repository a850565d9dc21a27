import { writeSync } from 'node:fs';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { stringify } from 'csv-stringify/sync';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { checkOutputPath, writeOutputFileWith } from '../output-file.ts';
import { isPostgresDatabase, openReader, type Reader } from './reader.ts';
import { orderByBytes, reportSelect } from './statements.ts';
import { viewName } from './views.ts';
import { filterClause } from './filter.ts';

/** Parquet column types the reports use; every column is nullable. */
type ColumnType = 'STRING' | 'INT32' | 'DOUBLE';

interface Report {
  /** The view (or, for items, the table) it reads. */
  from: (table: string) => string;
  columns: Record<string, ColumnType>;
  /** A total order (ties broken down to a unique row), so that both databases give the same file. */
  order: string;
  /** Columns the --country filter applies to. */
  countryColumns: string[];
}

const text = (...names: string[]) => Object.fromEntries(names.map((n) => [n, 'STRING' as const]));
const ints = (...names: string[]) => Object.fromEntries(names.map((n) => [n, 'INT32' as const]));

export const REPORTS: Record<'rankings' | 'domains' | 'overlap' | 'changes' | 'tracked' | 'tracked_latest' | 'spend', Report> = {
  rankings: {
    from: (table) => viewName(table, 'rankings'),
    columns: {
      ...text('query', 'country', 'lang'),
      ...ints('rank'),
      ...text('title', 'url', 'domain'),
      ...ints('page', 'position'),
      ...text('dedupe_key', 'run_id', 'fetched_at'),
      ...ints('age_runs'),
    },
    order: 'query, country, lang, rank, page, position',
    countryColumns: ['country'],
  },
  domains: {
    from: (table) => viewName(table, 'domains'),
    columns: { ...text('query', 'country', 'domain'), ...ints('results', 'best_rank'), average_rank: 'DOUBLE', share: 'DOUBLE' },
    order: 'query, country, results DESC, best_rank, domain',
    countryColumns: ['country'],
  },
  overlap: {
    from: (table) => viewName(table, 'overlap'),
    columns: { ...text('query', 'lang', 'country_a', 'country_b'), ...ints('shared', 'top_a', 'top_b'), jaccard: 'DOUBLE' },
    order: 'query, lang, country_a, country_b',
    countryColumns: ['country_a', 'country_b'],
  },
  changes: {
    from: (table) => viewName(table, 'changes'),
    columns: { ...text('query', 'country', 'lang', 'dedupe_key', 'url', 'title'), ...ints('previous_rank', 'current_rank', 'rank_delta'), ...text('change', 'run_id', 'previous_run_id', 'reason') },
    order: 'query, country, lang, change, current_rank, dedupe_key',
    countryColumns: ['country'],
  },
  tracked: {
    from: (table) => viewName(table, 'tracked'),
    columns: { ...text('run_id', 'query', 'country', 'lang', 'domain'), ...ints('rank', 'searched', 'found'), ...text('position') },
    order: 'query, country, lang, domain, run_id',
    countryColumns: ['country'],
  },
  tracked_latest: {
    from: (table) => viewName(table, 'tracked_latest'),
    columns: { ...text('query', 'country', 'lang', 'domain'), ...ints('rank', 'searched', 'found'), ...text('position', 'run_id'), ...ints('age_runs') },
    order: 'query, country, lang, domain',
    countryColumns: ['country'],
  },
  spend: {
    from: () => viewName('results', 'spend'),
    columns: { ...text('run_id', 'query', 'country', 'endpoint'), ...ints('requests', 'answered'), credits: 'DOUBLE', uncertain_credits: 'DOUBLE', uncommitted_credits: 'DOUBLE' },
    order: 'run_id, query, country',
    countryColumns: ['country'],
  },
};

export const REPORT_NAMES = ['rankings', 'domains', 'overlap', 'changes', 'tracked', 'tracked_latest', 'spend', 'items'] as const;

export const exportOptionsSchema = z.strictObject({
  /** The SQLite file a pipeline wrote, or a PostgreSQL database (`postgres://…`; `postgres:` for DATABASE_URL / PGHOST…). */
  database: z.string().min(1),
  /** PostgreSQL: the schema of the results table (default `public`) and of the run state (default `webdata`). */
  schema: z.string().optional(),
  stateSchema: z.string().optional(),
  report: z.enum(REPORT_NAMES, { error: `must be one of ${REPORT_NAMES.join(', ')}` }),
  format: z.enum(['csv', 'jsonl', 'parquet'], { error: 'must be csv, jsonl or parquet' }).default('csv'),
  /** A file, or a stream (stdout); Parquet needs a file. */
  out: z.union([z.string().min(1), z.custom<Writable>((v) => typeof v === 'object' && v !== null && 'write' in v)]),
  query: z.string().optional(),
  country: z.string().trim().toLowerCase().optional(),
  /** The results table (default `results`). */
  table: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, { error: 'must be a table name' }).default('results'),
  /** Rows per Parquet row group (and per write): what export holds in memory at once. */
  batchRows: z.int().positive().default(50_000),
});

export type ExportOptions = z.input<typeof exportOptionsSchema>;

/**
 * Streams a report (an analytics view, or the items themselves) out of a pipeline's SQLite file as CSV, JSON Lines
 * or Parquet, in batches, so that memory stays flat whatever the number of rows. Resolves to the rows written.
 *
 * A file is written whole or not at all (a temporary file beside it, renamed over it at the end: see output-file.ts),
 * created 0600; an output that is the database being read, or one of its -wal, -shm or -journal files, is refused.
 */
export async function exportReport(options: ExportOptions): Promise<{ rows: number }> {
  const config = ValidationError.parse(exportOptionsSchema, options, 'Invalid export');
  if (config.format === 'parquet' && typeof config.out !== 'string') {
    throw new ValidationError('Invalid export', [{ path: 'out', message: 'Parquet is written to a file: give --out <file.parquet>' }]);
  }
  if (typeof config.out === 'string') checkOutputPath(config.out, { databases: isPostgresDatabase(config.database) ? [] : [config.database] });
  const reader = await openReader(config.database, config);
  try {
    const known = config.report === 'items' ? await itemsReport(reader, config.table) : REPORTS[config.report];
    const at = config.report === 'spend' ? 'state' : 'results';
    const source = known.from(config.table);
    if (!(await reader.exists(source, at))) {
      throw new ValidationError(`No ${config.report} report in ${reader.label}`, [
        {
          path: 'report',
          message:
            `${source} does not exist: the views are created by the SQLite and PostgreSQL sinks for their table ("${config.table}"); ` +
            '"changes" needs append mode, and none of them exist with a dedupe wider than the series (see docs/analytics.md, "Where the views apply")',
        },
      ]);
    }
    // A view an older webdata-etl made (a database no run has opened since) may lack the newer columns: NULL there.
    const present = at === 'results' ? (await reader.columns(source)).map((c) => c.name) : [];
    // The view's columns beyond the report's own are a query file's tag columns (rankings, changes), after them as text.
    const report = { ...known, columns: { ...known.columns, ...text(...present.filter((c) => !Object.hasOwn(known.columns, c))) } };
    const where = filterClause(config, report.countryColumns);
    const columns = Object.keys(report.columns);
    const order = report.order === INSERTION_ORDER ? reader.insertionOrder : orderByBytes(report.order, (column) => report.columns[column] === 'STRING', reader.dialect.bytes);
    const absent = new Set(present.length === 0 ? [] : columns.filter((c) => !present.includes(c)));
    const rows = reader.iterate(reportSelect(columns, reader.name(source, at), where.sql, order, absent), where.params);
    const { out, format, batchRows } = config;
    if (typeof out !== 'string') return { rows: await writeText(rows, columns, format as 'csv' | 'jsonl', toStream(out), batchRows) };
    const count = await writeOutputFileWith(out, async (file) =>
      format === 'parquet' ? writeParquet(rows, report.columns, file.fd, batchRows) : writeText(rows, columns, format, file.write, batchRows),
    );
    return { rows: count };
  } finally {
    await reader.close();
  }
}

const INSERTION_ORDER = '(insertion)';

/** The items report is the results table itself, typed from its declared columns. */
async function itemsReport(reader: Reader, table: string): Promise<Report> {
  return {
    from: () => table,
    columns: Object.fromEntries((await reader.columns(table)).map((c) => [c.name, c.integer ? 'INT32' : 'STRING'])),
    order: INSERTION_ORDER,
    countryColumns: ['country'],
  };
}

/**
 * Writes to a stream, resolving when it can take more: a slow reader holds the export back instead of rows piling up.
 * A stream that failed (stdout whose reader went away: EPIPE) or was closed ends the export with its error, at the
 * write that finds it so or while waiting for it to drain, never a wait for a 'drain' that cannot come.
 */
function toStream(stream: Writable): (text: string) => Promise<void> {
  return async (text) => {
    if (stream.errored) throw stream.errored;
    if (stream.destroyed) throw new Error('the output stream was closed');
    if (stream.write(text)) return;
    const ac = new AbortController();
    const closed = once(stream, 'close', { signal: ac.signal }).then(() => {
      throw stream.errored ?? new Error('the output stream was closed');
    });
    try {
      await Promise.race([once(stream, 'drain', { signal: ac.signal }), closed]);
    } finally {
      ac.abort();
      closed.catch(() => undefined);
    }
  };
}

async function writeText(rows: AsyncIterable<Record<string, unknown>>, columns: string[], format: 'csv' | 'jsonl', write: (text: string) => Promise<void>, batchRows: number): Promise<number> {
  const csv = { record_delimiter: 'windows' as const, escape_formulas: true, header: false };
  const chunkRows = Math.min(batchRows, 2000);
  let count = 0;
  let batch: Record<string, unknown>[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const text =
      format === 'csv'
        ? stringify(batch.map((row) => columns.map((c) => row[c] ?? '')), csv)
        : batch.map((row) => `${JSON.stringify(row)}\n`).join('');
    batch = [];
    // Awaited: a slow disk or reader holds the export back instead of the rows piling up in memory.
    await write(text);
  };
  if (format === 'csv') await write(stringify([columns], { ...csv, escape_formulas: false }));
  for await (const row of rows) {
    batch.push(row);
    count += 1;
    if (batch.length >= chunkRows) await flush();
  }
  await flush();
  return count;
}

/** Parquet in row groups of `batchRows`: typed columns, every one nullable, written to the open file `fd`. */
async function writeParquet(rows: AsyncIterable<Record<string, unknown>>, types: Record<string, ColumnType>, fd: number, batchRows: number): Promise<number> {
  const columns = Object.keys(types);
  const schema = [
    { name: 'root', num_children: columns.length },
    ...columns.map((name) => {
      const type = types[name] as ColumnType;
      return type === 'STRING'
        ? { name, type: 'BYTE_ARRAY' as const, converted_type: 'UTF8' as const, repetition_type: 'OPTIONAL' as const }
        : { name, type, repetition_type: 'OPTIONAL' as const };
    }),
  ];
  const writer = new ParquetWriter({ writer: fdWriter(fd), schema, createdBy: 'webdata-etl' });
  let count = 0;
  let batch: Record<string, unknown>[] = [];
  const flush = () => {
    if (batch.length === 0) return;
    writer.write({
      columnData: columns.map((name) => ({ name, data: batch.map((row) => cell(row[name], types[name] as ColumnType)) })),
      rowGroupSize: batchRows,
    });
    batch = [];
  };
  for await (const row of rows) {
    batch.push(row);
    count += 1;
    if (batch.length >= batchRows) flush();
  }
  flush();
  writer.finish();
  return count;
}

/**
 * hyparquet-writer's buffered writer, to an open file rather than a path: its own `fileWriter(path)` creates the file
 * itself (mode 0666 less the umask) and reopens it by name for every chunk.
 */
function fdWriter(fd: number): ByteWriter {
  const writer = new ByteWriter();
  const flush = () => {
    const bytes = new Uint8Array(writer.buffer, 0, writer.index);
    for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset, bytes.length - offset);
    writer.index = 0;
  };
  // As fileWriter does: flush past 1 MB, otherwise grow the buffer to fit.
  writer.ensure = (size: number) => {
    if (writer.index > 1_000_000) flush();
    if (writer.index + size > writer.buffer.byteLength) {
      const grown = new ArrayBuffer(Math.max(writer.buffer.byteLength * 2, writer.index + size));
      new Uint8Array(grown).set(new Uint8Array(writer.buffer));
      writer.buffer = grown;
      writer.view = new DataView(grown);
    }
  };
  writer.finish = flush;
  return writer;
}

function cell(value: unknown, type: ColumnType): string | number | null {
  if (value === null || value === undefined) return null;
  if (type === 'STRING') return String(value);
  return Number(value);
}
