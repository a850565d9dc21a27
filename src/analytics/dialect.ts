/**
 * The two SQL dialects the views are written in (and the report's, the digest's and `runs`' statements over them and
 * the state store). The views are one text; these are the few places SQLite and
 * PostgreSQL differ: counts and sums of integers (bigint, which node-postgres hands over as text), rounded averages
 * (numeric, likewise), text order (PostgreSQL's follows the database's collation; the views compare bytes, as SQLite
 * does, so that both answer the same), and booleans.
 */
export interface Dialect {
  int(expression: string): string;
  real(expression: string): string;
  /** `expression` compared and ordered by its bytes. */
  bytes(expression: string): string;
  isTrue(expression: string): string;
  /**
   * The series' key a results table's B-tree index leads with, as the lookups of a series' rows by another relation's
   * series (`a`, `b`: the aliases) say it: PostgreSQL's index takes the query's digest (a B-tree entry holds 2,704
   * bytes, a query may be longer: sinks/statements.ts), which a lookup must name to use it; SQLite's, the query.
   */
  sameQuery(a: string, b: string): string;
}

export const SQLITE: Dialect = { int: (e) => e, real: (e) => e, bytes: (e) => e, isTrue: (e) => `${e} = 1`, sameQuery: (a, b) => `${a}.query = ${b}.query` };
export const POSTGRES: Dialect = {
  int: (e) => `(${e})::int`,
  real: (e) => `(${e})::float8`,
  bytes: (e) => `${e} COLLATE "C"`,
  isTrue: (e) => e,
  sameQuery: (a, b) => `md5(${a}.query) = md5(${b}.query) AND ${a}.query = ${b}.query`,
};
