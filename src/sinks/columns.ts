import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { NORMALIZED_COLUMNS, normalizedItemSchema } from '../stages/normalized-item.ts';
import { toJson } from '../json.ts';
import { COLUMN_NAME } from '../sources/tag-columns.ts';

/** A column name that is safe to put in a CSV header (and quoted in SQL all the same). */
export const columnName = z.string().regex(COLUMN_NAME, { error: 'must be a column name: letters, digits and _, not starting with a digit' });

export const DEFAULT_COLUMNS: readonly string[] = NORMALIZED_COLUMNS;

/** The key of a row in upsert mode (SQLite and PostgreSQL). */
export const UPSERT_KEY: readonly string[] = ['query', 'country', 'lang', 'dedupe_key'];
/** Columns upsert adds to every row itself: when a row was first and last seen, and by which run first. */
export const UPSERT_COLUMNS: readonly string[] = ['first_seen', 'last_seen', 'first_run_id'];

const upsertAdds = (column: string) => UPSERT_COLUMNS.includes(column.toLowerCase());

/** A sink's own `columns` in upsert mode name none of the columns upsert adds (they would be there twice). */
export function upsertColumnsFree(config: { mode: string; columns?: readonly string[] | undefined }, ctx: z.RefinementCtx): void {
  if (config.mode !== 'upsert') return;
  for (const column of (config.columns ?? []).filter(upsertAdds)) {
    ctx.addIssue({ code: 'custom', path: ['columns'], message: `${column}: upsert adds ${UPSERT_COLUMNS.join(', ')} to every row itself; leave it out of columns` });
  }
}

/**
 * Tag columns in upsert mode: a query file's column (or a source's tag column) named first_seen, last_seen or
 * first_run_id would be a second column of that name — refused when the sink opens, before any request, naming it.
 */
export function checkUpsertTags(tagColumns: readonly string[], subject: string, field: string): void {
  const clashing = tagColumns.filter(upsertAdds);
  if (clashing.length === 0) return;
  throw new ValidationError(subject, [
    {
      path: field,
      message:
        `upsert adds ${UPSERT_COLUMNS.join(', ')} to every row itself, and the source has the tag column ${clashing.join(', ')} ` +
        '(a column of the query file, or of tagColumns): rename that column, or use append or replace mode',
    },
  ]);
}

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

/**
 * Options that name the columns: such a sink takes items of any shape (any object; a column it lacks is empty). Without them it writes the normalized
 * item's columns, and takes normalized items (docs/pipelines.md#composing-in-code).
 */
export interface OwnColumns {
  readonly columns: readonly string[];
}
