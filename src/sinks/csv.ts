import { readSync } from 'node:fs';
import { resolve } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { NORMALIZED_COLUMNS } from '../stages/normalized-item.ts';
import { appendOnlyFile } from './append-only-file.ts';
import { checkNormalized, columnName, csvValue } from './columns.ts';
import type { OwnColumns } from './columns.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';
import type { CsvFormat, Sink } from './sink.ts';

const BOM = '\uFEFF';

export const csvSinkOptionsSchema = z.strictObject({
  path: z.string().min(1, { error: 'must be a file path such as "data/results.csv"' }),
  /** Columns, in order. Default: the normalized item's, without `raw` (the item's JSON stays in SQLite and JSONL). */
  columns: z.array(columnName).min(1).optional(),
  /** Start a new file with a UTF-8 byte-order mark (for Excel). */
  bom: z.boolean().default(false),
  /**
   * Prefix cells that begin with = + - @ tab or carriage return with a quote, so that spreadsheets do not run them
   * as formulas (CSV injection). On by default; off for byte-exact data.
   */
  escapeFormulas: z.boolean().default(true),
  delimiter: z.string().length(1, { error: 'must be one character' }).default(','),
  /**
   * Let other pipelines write this file too (each must say so). Each then only appends, and never cuts the file back
   * after a crash: rows arrive at least once instead of exactly once.
   */
  shared: z.boolean().default(false),
  /**
   * In a distributed run, each worker writes a file of its own beside `path` (`results.<host>-<n>.csv`), exactly once
   * each; the run is then not kept on one process by this sink. In a one-process run, the file is `path`.
   */
  perWorker: z.boolean().default(false),
});

export type CsvSinkOptions = z.input<typeof csvSinkOptionsSchema>;

export const DEFAULT_CSV_COLUMNS: readonly string[] = NORMALIZED_COLUMNS.filter((c) => c !== 'raw');

/**
 * Rows into a CSV file (RFC 4180: CRLF line ends, fields quoted when needed) with explicit columns, so that a
 * missing title on the first row cannot drop the column. Each page is written synchronously, then the file's
 * committed length is checkpointed; on the next open a longer file is cut back to it (a crash between the two),
 * so that no row is written twice and the header and BOM never repeat.
 */
export function toCsv(options: CsvSinkOptions & OwnColumns): Sink<object>;
export function toCsv(options: CsvSinkOptions): Sink<NormalizedItem>;
export function toCsv(options: CsvSinkOptions): Sink<Record<string, unknown>> {
  const config = ValidationError.parse(csvSinkOptionsSchema, options, 'Invalid CSV sink', 'csv');
  let columns: readonly string[] = config.columns ?? DEFAULT_CSV_COLUMNS;
  const path = resolve(config.path);
  const format: CsvFormat = { delimiter: config.delimiter, escape_formulas: config.escapeFormulas, record_delimiter: 'windows', header: false };
  const fill = (items: readonly Record<string, unknown>[], into: string[]) => {
    if (!config.columns) checkNormalized(items[0], `The CSV sink ${path}`);
    for (const item of items) for (const column of columns) into.push(csvValue(item[column]));
  };

  return appendOnlyFile(path, {
    kind: 'csv',
    prepare(ctx, fd, size) {
      if (!config.columns) columns = [...DEFAULT_CSV_COLUMNS, ...ctx.tagColumns];
      const header = stringify([columns], { ...format, escape_formulas: false });
      // A new file starts with its header (and BOM); an existing one must already have this header, once.
      if (size === 0) return (config.bom ? BOM : '') + header;
      const existing = readHeader(fd);
      if (existing !== header) {
        throw new ValidationError(`${path} already holds other columns`, [
          {
            path: 'csv.columns',
            message: `its header is ${JSON.stringify(existing.trimEnd())}, this pipeline writes ${JSON.stringify(header.trimEnd())}: use another file, or the same columns`,
          },
        ]);
      }
      return undefined;
    },
    content(items) {
      const cells: string[] = [];
      fill(items, cells);
      return { csv: format, width: columns.length, cells };
    },
    terms: { columns: config.columns ?? 'default' },
  }, { shared: config.shared, perWorker: config.perWorker });
}

/** The first record of the file, with its line end, without a byte-order mark. */
function readHeader(fd: number): string {
  const buffer = Buffer.alloc(64 * 1024);
  const length = readSync(fd, buffer, 0, buffer.length, 0);
  let text = buffer.subarray(0, length).toString('utf8');
  if (text.startsWith(BOM)) text = text.slice(1);
  const end = text.indexOf('\n');
  return end === -1 ? text : text.slice(0, end + 1);
}
