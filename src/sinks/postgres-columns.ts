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

// PostgreSQL's text cannot hold U+0000 (nor can jsonb, escaped): it becomes U+FFFD, the replacement character —
// where it is a character, when the statement's parameters are bound (postgres/storable.ts, every statement's way).
// In JSON text, an escape that jsonb refuses: U+0000, or a surrogate that is not half of a pair (a pair is matched
// first, and kept). Only escapes: a backslash before it that is itself escaped makes it text.
const REFUSED_ESCAPE = /(?<!\\)((?:\\\\)*)(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\\u0000)/g;

/**
 * The deepest nesting stored as jsonb. PostgreSQL parses jsonb recursively and stops at its stack depth (20,000
 * levels fail with the default `max_stack_depth`); nothing a search API sends comes near this.
 */
export const MAX_JSONB_DEPTH = 1000;

/**
 * JSON text as jsonb takes it: refused escapes as U+FFFD; nesting past `MAX_JSONB_DEPTH` kept whole as a jsonb
 * string of its text (`raw #>> '{}'` gives it back).
 */
export function storableJson(json: string): string {
  // A NUL character (not JSON, but a user's raw may be any text) goes first, or the deep form below would escape it.
  const text = json.includes('\0') ? json.replaceAll('\0', '\ufffd') : json;
  const escaped = text.includes('\\u') ? text.replace(REFUSED_ESCAPE, (match, backslashes: string, escape: string) => (escape.length === 12 ? match : `${backslashes}\\ufffd`)) : text;
  return json.length > 2 * MAX_JSONB_DEPTH && nesting(escaped) > MAX_JSONB_DEPTH ? JSON.stringify(escaped) : escaped;
}

/** How deep JSON text nests (arrays and objects), strings skipped. */
function nesting(json: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

/**
 * A value as the column's PostgreSQL type takes it: JSON as jsonb takes it, objects as JSON, null as null (U+0000 in
 * text is replaced where parameters are bound, `storable`).
 */
export function postgresValue(column: string, value: unknown): unknown {
  if (value === undefined || value === null) return null;
  if (JSON_COLUMNS.has(column)) return storableJson(typeof value === 'string' ? value : toJson(value));
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return toJson(value);
}
