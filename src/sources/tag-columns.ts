import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { NORMALIZED_COLUMNS } from '../stages/normalized-item.ts';

/**
 * A name a column may have: letters, digits and _, not starting with a digit, at most 63 (PostgreSQL's limit, in
 * bytes). Safe in a CSV header; quoted in SQL all the same (see sql-identifier.ts).
 */
export const COLUMN_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Tag columns of one source at the most: each becomes a column of every output (SQLite takes 2,000 columns at most). */
export const MAX_TAG_COLUMNS = 100;

const NORMALIZED = new Set<string>(NORMALIZED_COLUMNS);

/**
 * The tag columns a source names (`tagColumns` of `defineSource`, a plan's): each a column name, each once and none
 * a normalized item's column — compared without case, as SQLite compares column names — since with the sinks' default
 * columns every one becomes a column beside the normalized item's. A query file's headers are made so already.
 */
export const tagColumnsSchema = z
  .array(z.string().regex(COLUMN_NAME, { error: 'must be a column name: letters, digits and _, not starting with a digit, at most 63' }))
  .max(MAX_TAG_COLUMNS, { error: `at most ${MAX_TAG_COLUMNS} tag columns (each becomes a column of every output)` })
  .superRefine((names, ctx) => {
    const seen = new Set<string>();
    names.forEach((name, i) => {
      const folded = name.toLowerCase();
      if (NORMALIZED.has(folded)) {
        ctx.addIssue({ code: 'custom', path: [i], message: `${name} is a column of the normalized item: name the tag otherwise (a query file's column of that name becomes tag_${folded})` });
      } else if (seen.has(folded)) ctx.addIssue({ code: 'custom', path: [i], message: `names the column ${name} twice (column names are compared without case)` });
      seen.add(folded);
    });
  });

/**
 * A plan's tag columns, checked before any sink opens: `defineSource` checks its own, and a source may be any object
 * with a `plan()` (they become columns, and the sinks quote them, but a name twice or a normalized column's would fail
 * at the database, exit 1, instead of here, exit 2).
 */
export function checkTagColumns(tagColumns: readonly string[] | undefined): void {
  ValidationError.parse(tagColumnsSchema, tagColumns ?? [], 'Invalid source', 'source.tagColumns');
}
