import { UsageError } from '../errors/usage-error.ts';

/**
 * What `export` and `report` share: one database to read, and the filters `--query`, `--country` and `--table`
 * (the results table), with the same meaning in both.
 */
export const FILTER_OPTIONS = {
  query: { type: 'string' },
  country: { type: 'string' },
  table: { type: 'string' },
} as const;

/** The filters given, as options for `exportReport` and `writeReport` (an absent one stays absent). */
export function filtersFrom(values: { query?: string | undefined; country?: string | undefined; table?: string | undefined }) {
  return {
    ...(values.query !== undefined ? { query: values.query } : {}),
    ...(values.country !== undefined ? { country: values.country } : {}),
    ...(values.table ? { table: values.table } : {}),
  };
}

/** The one database the command reads, or a usage error showing how to call it. */
export function oneDatabase(positionals: string[], command: string, example: string): string {
  const [database] = positionals;
  if (!database || positionals.length > 1) throw new UsageError(`${command} takes one database: ${example}`);
  return database;
}
