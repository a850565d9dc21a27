import { closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, readSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { z } from 'zod';
import { ValidationError } from '../client/errors.ts';
import { crashPoint } from '../run/crash-points.ts';
import type { SinkCheckpoints } from '../state/checkpoints.ts';
import { NORMALIZED_COLUMNS } from '../stages/normalized-item.ts';
import { checkNormalized, columnName, csvValue } from './columns.ts';
import type { Sink, SinkContext } from './sink.ts';

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
});

export type CsvSinkOptions = z.input<typeof csvSinkOptionsSchema>;

export const DEFAULT_CSV_COLUMNS: readonly string[] = NORMALIZED_COLUMNS.filter((c) => c !== 'raw');

/**
 * Rows into a CSV file (RFC 4180: CRLF line ends, fields quoted when needed) with explicit columns, so that a
 * missing title on the first row cannot drop the column. Each page is written synchronously, then the file's
 * committed length is checkpointed; on the next open a longer file is cut back to it (a crash between the two),
 * so that no row is written twice and the header and BOM never repeat.
 */
export function toCsv(options: CsvSinkOptions): Sink<Record<string, unknown>> {
  const config = ValidationError.parse(csvSinkOptionsSchema, options, 'Invalid CSV sink', 'csv');
  let columns: readonly string[] = config.columns ?? DEFAULT_CSV_COLUMNS;
  const path = resolve(config.path);
  const id = `csv:${path}`;
  const format = { delimiter: config.delimiter, escape_formulas: config.escapeFormulas, record_delimiter: 'windows' as const, header: false };
  let file: { fd: number; checkpoints: SinkCheckpoints } | undefined;
  let bytes = 0;
  let held = 0;

  const ready = () => {
    if (!file) throw new Error(`the CSV sink ${path} was not opened`);
    return file;
  };
  const append = (fd: number, text: string) => {
    const buffer = Buffer.from(text, 'utf8');
    let written = 0;
    while (written < buffer.length) written += writeSync(fd, buffer, written);
    bytes += buffer.length;
  };

  return {
    kind: 'csv',
    path,
    id,
    open(ctx: SinkContext) {
      if (!config.columns) columns = [...DEFAULT_CSV_COLUMNS, ...ctx.tagColumns];
      const header = stringify([columns], { ...format, escape_formulas: false });
      mkdirSync(dirname(path), { recursive: true });
      const fd = openSync(path, 'a+');
      try {
        const checkpoint = ctx.stateCheckpoints.get(id);
        let size = fstatSync(fd).size;
        held = checkpoint?.seq ?? ctx.currentSeq;
        if (checkpoint?.bytes !== undefined && checkpoint.bytes !== null && size !== 0) {
          if (size < checkpoint.bytes) {
            throw new Error(
              `${path} is shorter (${size} bytes) than what was committed to it (${checkpoint.bytes} bytes): it was changed outside webdata-etl. ` +
                'Move it aside to start a new file.',
            );
          }
          // Bytes past the checkpoint were written but never committed (a crash in between): they go.
          if (size > checkpoint.bytes) ftruncateSync(fd, checkpoint.bytes);
          size = checkpoint.bytes;
        }
        bytes = size;
        if (size === 0) {
          append(fd, (config.bom ? BOM : '') + header);
        } else {
          const existing = readHeader(fd);
          if (existing !== header) {
            throw new ValidationError(`${path} already holds other columns`, [
              {
                path: 'csv.columns',
                message: `its header is ${JSON.stringify(existing.trimEnd())}, this pipeline writes ${JSON.stringify(header.trimEnd())}: use another file, or the same columns`,
              },
            ]);
          }
        }
        ctx.stateCheckpoints.set(id, { seq: held, bytes });
        file = { fd, checkpoints: ctx.stateCheckpoints };
      } catch (error) {
        closeSync(fd);
        throw error;
      }
    },
    held: () => held,
    committedBytes: () => bytes,
    write(page, seq) {
      const { fd, checkpoints } = ready();
      if (page.items.length > 0) {
        if (!config.columns) checkNormalized(page.items[0], `The CSV sink ${path}`);
        append(fd, stringify(page.items.map((item) => columns.map((column) => csvValue(item[column]))), format));
        crashPoint('file-before-checkpoint');
      }
      checkpoints.set(id, { seq, bytes });
      held = seq;
    },
    discard(_runId, since) {
      const { fd, checkpoints } = ready();
      if (since.bytes !== null && since.bytes < bytes) {
        ftruncateSync(fd, since.bytes);
        bytes = since.bytes;
        checkpoints.set(id, { seq: held, bytes });
      }
    },
    close() {
      if (file) closeSync(file.fd);
      file = undefined;
    },
  };
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
