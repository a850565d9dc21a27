import type { z } from 'zod';
import { toJson } from '../json.ts';
import { normalizedItemSchema } from '../stages/normalized-item.ts';

/** Columns of the normalized item that hold times, and the one that holds JSON. */
const TIMES = new Set(['fetched_at', 'first_seen', 'last_seen']);
const JSON_COLUMNS = new Set(['raw']);

/**
 * PostgreSQL type of a column: typed from the normalized item's schema (`integer`, `timestamptz` for times, `jsonb`
 * for `raw`, `text`), `text` for the rest (tag columns, columns of one's own).
 */
export function postgresColumnType(column: string): string {
  const field = (normalizedItemSchema.shape as Record<string, z.ZodType>)[column];
  if (!field) return TIMES.has(column) ? 'timestamptz' : 'text';
  const nullable = field.safeParse(null).success ? '' : ' NOT NULL';
  if (TIMES.has(column)) return `timestamptz${nullable}`;
  if (JSON_COLUMNS.has(column)) return `jsonb${nullable}`;
  const integer = field.safeParse(1).success && !field.safeParse(1.5).success;
  return `${integer ? 'integer' : 'text'}${nullable}`;
}

// PostgreSQL's text cannot hold U+0000 (nor can jsonb, escaped): it becomes U+FFFD, the replacement character.
const NUL = /\u0000/g;
const ESCAPED_NUL = /(?<!\\)((?:\\\\)*)\\u0000/g;

/** A value as the column's PostgreSQL type takes it: text and JSON without U+0000, objects as JSON, null as null. */
export function postgresValue(column: string, value: unknown): unknown {
  if (value === undefined || value === null) return null;
  if (JSON_COLUMNS.has(column)) return (typeof value === 'string' ? value : toJson(value)).replace(ESCAPED_NUL, '$1\\ufffd');
  if (typeof value === 'string') return value.replace(NUL, '\ufffd');
  if (typeof value === 'number' || typeof value === 'bigint') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return toJson(value).replace(NUL, '\ufffd');
}
