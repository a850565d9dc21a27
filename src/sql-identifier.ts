/**
 * A name as SQL takes it, in SQLite and PostgreSQL alike: in double quotes, each `"` in it doubled. Every table,
 * column, view, index, schema and channel name enters SQL through here, ours or read from a database: so quoted, a
 * name is only ever a name (a column called `run_id", pg_read_file('PG_VERSION') AS "q` is one odd column, never a
 * function call). Values never enter SQL this way: they are bound parameters.
 */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
