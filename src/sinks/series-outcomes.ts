import { ValidationError } from '../errors/validation-error.ts';

/*
 * How each series ended in each run, recorded beside a results table and in its database, so that the analytics views
 * can tell a series that completed (its rows are the whole series) from one that failed, ran out of budget, was
 * stopped or was never reached (its rows, if it has any, are a part of it): docs/analytics.md#failed-and-unreached-series.
 * The state store knows this too, but it may be another file or database than the results (docs/design.md#the-state-store),
 * and the views read only their own.
 */

/** One series of a run as its rows know it: by (query, country, lang), the columns every row of it carries. */
export interface SeriesOutcome {
  readonly query: string;
  readonly country: string;
  readonly lang: string;
  /** Ended by one of its own stop rules (docs/design.md#pagination-and-stop-rules): its rows are the whole series. */
  readonly complete: boolean;
  /** The stop rule; else `failed`, `forbidden`, `budget`, the run's stop (`interrupted`, `quota`, …) or `not_reached`. */
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

/** The columns of an outcomes table, in order. */
export const OUTCOME_COLUMNS = ['run_id', 'query', 'country', 'lang', 'complete', 'reason'] as const;

const COLUMNS = OUTCOME_COLUMNS.join(', ');

/**
 * How a later invocation's record of a series meets an earlier one's: a series that completed in a run stays complete
 * there (the run never pages it again: its state only moves forward), so a record read before it completed — by a
 * worker of a distributed run that left earlier but wrote later — never undoes it; an incomplete one takes the latest
 * reason. `greatest` is the dialect's two-argument maximum (SQLite's MAX, PostgreSQL's GREATEST); `row` names the row
recorded before (PostgreSQL finds a bare column name ambiguous there, beside `excluded`).
 */
function keepComplete(greatest: 'MAX' | 'GREATEST', row = ''): string {
  return `reason = CASE WHEN ${row}complete = 1 THEN ${row}reason ELSE excluded.reason END, complete = ${greatest}(${row}complete, excluded.complete)`;
}

/** The statements of the outcomes table `o` beside the results table `t` in SQLite (both quoted); values as `?`. */
export function sqliteOutcomeStatements(t: string, o: string) {
  return {
    create: `CREATE TABLE IF NOT EXISTS ${o} (run_id TEXT NOT NULL, query TEXT NOT NULL, country TEXT NOT NULL, lang TEXT NOT NULL,
      complete INTEGER NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (query, country, lang, run_id))`,
    /** Every run the table holds but the one opening now (which records its own), as complete (`?`: the reason, the run). */
    backfill: `INSERT OR IGNORE INTO ${o} (${COLUMNS}) SELECT DISTINCT run_id, query, country, lang, 1, ? FROM ${t} WHERE run_id IS NOT NULL AND run_id <> ?`,
    /** One series' outcome in a run, recorded again by each invocation of it (`keepComplete`). */
    record: `INSERT INTO ${o} (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (query, country, lang, run_id) DO UPDATE SET ${keepComplete('MAX')}`,
    discard: `DELETE FROM ${o} WHERE run_id = ?`,
    keepOnly: `DELETE FROM ${o} WHERE run_id <> ?`,
  };
}

/**
 * The same in PostgreSQL: `t` and `o` quoted and qualified, `key` the unique index's name (quoted, in their schema);
 * values as `$n`. A B-tree entry holds 2,704 bytes at most and a query may be longer: the key takes the query's digest,
 * as a results table's upsert key does.
 */
export function postgresOutcomeStatements(t: string, o: string, key: string) {
  const target = 'md5(query), country, lang, run_id';
  return {
    create: [
      `CREATE TABLE IF NOT EXISTS ${o} (run_id text NOT NULL, query text NOT NULL, country text NOT NULL, lang text NOT NULL, complete integer NOT NULL, reason text NOT NULL)`,
      `CREATE UNIQUE INDEX IF NOT EXISTS ${key} ON ${o} (${target})`,
    ],
    backfill: `INSERT INTO ${o} (${COLUMNS}) SELECT DISTINCT run_id, query, country, lang, 1, $1 FROM ${t} WHERE run_id IS NOT NULL AND run_id <> $2 ON CONFLICT DO NOTHING`,
    /** A slice of the plan's outcomes, one array per column (`$1`: the run). */
    record: `INSERT INTO ${o} AS recorded (${COLUMNS}) SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::int[], $6::text[])
      ON CONFLICT (${target}) DO UPDATE SET ${keepComplete('GREATEST', 'recorded.')}`,
    discard: `DELETE FROM ${o} WHERE run_id = $1`,
    keepOnly: `DELETE FROM ${o} WHERE run_id <> $1`,
  };
}

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
