import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { NORMALIZED_COLUMNS, normalizedItemSchema } from '../stages/normalized-item.ts';
import { toJson } from '../json.ts';

/** A column name that is safe to quote in SQL and to put in a CSV header. */
export const columnName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, { error: 'must be a column name: letters, digits and _, not starting with a digit' });

export const DEFAULT_COLUMNS: readonly string[] = NORMALIZED_COLUMNS;

/** SQLite declaration of a column: from the normalized item's schema when it is one of its fields. */
export function sqlType(column: string): string {
  const field = (normalizedItemSchema.shape as Record<string, z.ZodType>)[column];
  if (!field) return '';
  const nullable = field.safeParse(null).success;
  const integer = field.safeParse(1).success && !field.safeParse(1.5).success;
  return `${integer ? 'INTEGER' : 'TEXT'}${nullable ? '' : ' NOT NULL'}`;
}

/** A value as SQLite stores it: text, numbers and null as they are; booleans as 0/1; objects as JSON. */
export function sqlValue(value: unknown): string | number | bigint | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return toJson(value);
}

/** A value as a CSV cell: null and undefined are empty; objects are JSON. */
export function csvValue(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return toJson(value);
}

/**
 * With the default columns a sink takes normalized items; a raw item would otherwise become a row of NULLs (CSV)
 * or a NOT NULL failure (SQLite). Checks the first item of a page.
 */
export function checkNormalized(item: Record<string, unknown> | undefined, sink: string): void {
  if (item !== undefined && item.run_id === undefined) {
    throw new ValidationError(`${sink} got an item that is not normalized`, [
      { path: 'stages', message: 'the sink writes normalized items by default: add normalize() to the stages, or give the sink its own columns' },
    ]);
  }
}
