import { quoteIdentifier } from '../sql-identifier.ts';

/** The `query` and `country` filters of exports and reports. */
export interface RowFilter {
  query?: string | undefined;
  country?: string | undefined;
}

/**
 * The WHERE clause (empty without filters) and its parameters. `country` matches any of `countryColumns`: a view of
 * country pairs matches when either side is the country.
 */
export function filterClause(filter: RowFilter, countryColumns: readonly string[] = ['country']): { sql: string; params: string[] } {
  const clauses: string[] = [];
  const params: string[] = [];
  if (filter.query !== undefined) {
    clauses.push('query = ?');
    params.push(filter.query);
  }
  if (filter.country !== undefined) {
    clauses.push(`(${countryColumns.map((column) => `${quoteIdentifier(column)} = ?`).join(' OR ')})`);
    params.push(...countryColumns.map(() => filter.country as string));
  }
  return { sql: clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : '', params };
}
