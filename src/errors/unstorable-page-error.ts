import { WebDataEtlError } from './web-data-etl-error.ts';

/**
 * A page whose values a database refused even after what webdata-etl replaces (docs/security.md, "Values a database
 * refuses"): a table of the user's with a narrower column or a CHECK, say. Its series fails with this reason (exit
 * 5); the run goes on. `kind` is the series' `error_kind`.
 */
export class UnstorablePageError extends WebDataEtlError {
  readonly kind = 'unstorable';
  readonly seriesId: string;
  /** The page that could not be stored. */
  readonly page: number;
  /** Where a retry of the series begins: that page again (paged by number), or null: after it (a cursor led to it). */
  readonly retryFrom: number | null;

  constructor(details: { seriesId: string; page: number; retryFrom: number | null }, message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'UnstorablePageError';
    this.seriesId = details.seriesId;
    this.page = details.page;
    this.retryFrom = details.retryFrom;
  }
}

/**
 * Whether a database refused a statement for a value in it — PostgreSQL's data exceptions (class 22: a NUL, bad JSON,
 * a value too long for its column), program limits (class 54: an index entry past 2,704 bytes, nesting past the
 * stack), a NOT NULL or CHECK of the table (23502, 23514) — as opposed to the connection, the disk, or a conflict.
 */
export function isRefusedValue(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(22\w{3}|54\w{3}|23502|23514)$/.test(code);
}
