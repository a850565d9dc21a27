import { once } from 'node:events';
import { readSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { toJson } from '../json.ts';
import { appendOnlyFile } from './append-only-file.ts';
import type { Sink } from './sink.ts';
import { defineSink } from './define-sink.ts';

export const jsonlSinkOptionsSchema = z.strictObject({
  /** The file, or `-` for stdout (not exactly once: see `toStdout`). */
  path: z.string().min(1, { error: 'must be a file path such as "data/results.jsonl", or "-" for stdout' }),
  /** Keep `raw` as the JSON text it is, instead of nesting the item as served. */
  rawAsString: z.boolean().default(false),
  /** Let other pipelines append to this file too (each must say so): at least once instead of exactly once. */
  shared: z.boolean().default(false),
  /** In a distributed run, each worker writes a file of its own beside `path` (`results.<host>-<n>.jsonl`). */
  perWorker: z.boolean().default(false),
});

export type JsonlSinkOptions = z.input<typeof jsonlSinkOptionsSchema>;

type Item = Record<string, unknown>;

/**
 * Items as JSON Lines (UTF-8, `\n`, no header): every field of each item, with `raw` nested as the item was
 * served. To a file, exactly once as the CSV sink does it: each page written synchronously, then the file's
 * committed length checkpointed; on the next open a longer file is cut back to it (a crash in between).
 */
export function toJsonl(options: JsonlSinkOptions): Sink<object>;
export function toJsonl(options: JsonlSinkOptions): Sink<Item> {
  const config = ValidationError.parse(jsonlSinkOptionsSchema, options, 'Invalid JSONL sink', 'jsonl');
  const toLines = (items: readonly Item[]) => items.map((item) => jsonLine(item, config.rawAsString)).join('');
  return config.path === '-' ? toStdout(toLines) : toFile(resolve(config.path), toLines, { shared: config.shared, perWorker: config.perWorker, rawAsString: config.rawAsString });
}

function toFile(path: string, toLines: (items: readonly Item[]) => string, options: { shared: boolean; perWorker: boolean; rawAsString: boolean }): Sink<Item> {
  return appendOnlyFile(path, {
    kind: 'jsonl',
    prepare(_ctx, fd, size) {
      // Appending to a last line without its line end would join two items into one broken line.
      if (size > 0 && lastByte(fd, size) !== 0x0a) {
        throw new ValidationError('Invalid JSONL sink', [
          { path: 'jsonl.path', message: `${path} does not end with a line end, so it cannot be appended to as JSON Lines: use another file, or end its last line` },
        ]);
      }
      return undefined;
    },
    content: (items) => ({ text: toLines(items) }),
    terms: { rawAsString: options.rawAsString },
  }, options);
}

/**
 * stdout, for piping: at least once. A pipe cannot be cut back or read again, so nothing is ever taken back, but
 * the sink does checkpoint the last page it handed to the pipe (its sequence number only): after a crash the runner
 * re-delivers from the journal every committed page past it, so a page is never missed — one written just before a
 * kill may come twice, and `--fresh` repeats the abandoned run's lines. Use a file for exactly once.
 */
function toStdout(toLines: (items: readonly Item[]) => string): Sink<Item> {
  const stdout = process.stdout;
  let failure: Error | undefined;
  // A reader that went away (EPIPE) while no write waits for 'drain' would be an uncaught error that kills the
  // process; this way it ends the run at the next page.
  const onError = (error: Error) => {
    failure ??= error;
  };
  return defineSink<Item>({
    kind: 'jsonl',
    target: '-',
    open() {
      stdout.on('error', onError);
    },
    async write(page) {
      if (failure) throw failure;
      // Backpressure: a slow reader holds the run back instead of the whole output piling up in memory.
      if (page.items.length > 0 && !stdout.write(toLines(page.items))) await once(stdout, 'drain');
    },
    close() {
      stdout.off('error', onError);
    },
  });
}

/**
 * One item as one line. `raw` is the item as served, a parsed value, written as the value it is (`rawAsString`: as its
 * JSON text, a string). A `raw` that a stage of one's own made JSON text is spliced in as it is: serializing it again
 * would be a second pass, and JSON.stringify overflows the stack on deep nesting. It is only parsed to check that it is
 * JSON (anything else stays a string).
 */
function jsonLine(item: Item, rawAsString: boolean): string {
  const raw = item.raw;
  // The item as served (a parsed value) is written as the value it is; kept as a string, as its JSON text.
  if (rawAsString && raw !== undefined && typeof raw !== 'string') return `${toJson({ ...item, raw: toJson(raw) })}\n`;
  if (rawAsString || typeof raw !== 'string' || !isJson(raw)) return `${toJson(item)}\n`;
  const fields: string[] = [];
  for (const [key, value] of Object.entries(item)) {
    // As JSON.stringify does: such fields are left out.
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol') continue;
    fields.push(`${JSON.stringify(key)}:${key === 'raw' ? oneLine(raw) : toJson(value)}`);
  }
  return `{${fields.join(',')}}\n`;
}

/** JSON.parse is iterative in V8: it takes any depth. */
function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Valid JSON text, made safe for a line of UTF-8: a raw CR or LF can only be whitespace between tokens (inside
 * strings they must be escaped), and a lone surrogate can only be inside a string, where its escape means the same.
 */
function oneLine(json: string): string {
  let text = /[\r\n]/.test(json) ? json.replace(/[\r\n]/g, ' ') : json;
  if (!text.isWellFormed()) {
    text = text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16)}`);
  }
  return text;
}

function lastByte(fd: number, size: number): number | undefined {
  const buffer = Buffer.alloc(1);
  readSync(fd, buffer, 0, 1, size - 1);
  return buffer[0];
}
