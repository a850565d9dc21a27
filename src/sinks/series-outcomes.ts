import { ValidationError } from '../errors/validation-error.ts';

/*
 * How each series ended in each run, recorded beside a results table and in its database, so that the analytics views
 * can tell a series that completed (its rows are the whole series) from one that failed, ran out of budget, was
 * stopped or was never reached (its rows, if it has any, are a part of it): docs/analytics.md#failed-and-unreached-series.
 * The state store knows this too, but it may be another file or database than the results (docs/design.md#the-state-store),
 * and the views read only their own. The table's statements, in SQLite and PostgreSQL: statements.ts.
 */

/** One series of a run as its rows know it: by (query, country, lang), the columns every row of it carries. */
export interface SeriesOutcome {
  readonly query: string;
  readonly country: string;
  readonly lang: string;
  /** Ended by one of its own stop rules (docs/design.md#pagination-and-stop-rules): its rows are the whole series. */
  readonly complete: boolean;
  /** The stop rule; else `failed`, `forbidden`, `budget`, the run's stop (`interrupted`, `quota`, …), `not_reached` or `skipped`. */
  readonly reason: string;
}

/** The outcomes table of a results table: `results_outcomes`, `serp_outcomes`. */
export function outcomesTable(table: string): string {
  return `${table}_outcomes`;
}

/**
 * The reason given to the runs a table held before outcomes were recorded: they are taken as complete, which is what
 * the views took every run for then, so that an older table reads as it did.
 */
export const UNRECORDED = 'unrecorded';

/** A series of the plan that the run never started: its budget ran out, or it stopped, first. */
export const NOT_REACHED = 'not_reached';

/**
 * A series the run's refresh plan did not fetch (docs/pipelines.md#the-refresh-planner): not complete, not failed, not
 * stopped; it has no rows in that run, and the views keep its last ranks with their age.
 */
export const SKIPPED = 'skipped';

/** The columns of an outcomes table, in order. */
export const OUTCOME_COLUMNS = ['run_id', 'query', 'country', 'lang', 'complete', 'reason'] as const;

/**
 * A table of the outcomes table's name that is not one (another program's, or a results table named so) is refused
 * before anything is written to it.
 */
export function checkOutcomeColumns(existing: readonly string[], name: string, where: string, field: string): void {
  const missing = OUTCOME_COLUMNS.filter((c) => !existing.includes(c));
  if (existing.length > 0 && missing.length > 0) {
    throw new ValidationError(`The table "${name}" in ${where} is not an outcomes table`, [
      { path: field, message: `it lacks ${missing.join(', ')}: the results table keeps how each series ended in "${name}"; rename that table, or use another results table` },
    ]);
  }
}
