/*
 * Each tracked domain's best rank per series and run (docs/pipelines.md#tracked-domains-and-depth-until-found),
 * recorded beside a results table as the outcomes are (series-outcomes.ts), in `<table>_tracked`, for the
 * `report_tracked` view: the rows alone cannot say "not found within N" (a domain not found has no row). Created
 * when a pipeline that tracks domains opens the table; its statements, in SQLite and PostgreSQL: statements.ts.
 */

/** One tracked domain of one series in one run. */
export interface TrackedRow {
  readonly query: string;
  readonly country: string;
  readonly lang: string;
  readonly domain: string;
  /** Its best rank (the rows' `rank`), or null: not found within `searched`. */
  readonly rank: number | null;
  /** The ranks the run searched: the series' highest rank. */
  readonly searched: number;
}

/** The tracked table of a results table: `results_tracked`, `serp_tracked`. */
export function trackedTable(table: string): string {
  return `${table}_tracked`;
}

/** The columns of a tracked table, in order. */
export const TRACKED_COLUMNS = ['run_id', 'query', 'country', 'lang', 'domain', 'rank', 'searched'] as const;
