import { readFileSync } from 'node:fs';
import { parse } from 'csv-parse/sync';
import { ValidationError } from '../client/errors.ts';
import { NORMALIZED_COLUMNS } from '../stages/normalized-item.ts';

/** A query and the tags carried with it into every row of its series. */
export interface ListedQuery {
  query: string;
  tags: Record<string, string> | undefined;
}

export interface QueryList {
  queries: ListedQuery[];
  /** Column names of the tags, as they appear in the outputs. */
  tagColumns: string[];
  dropped: { blank: number; duplicate: number };
}

/** Header names that hold the query in a CSV list, first found first; else the first column. */
const QUERY_COLUMNS = ['query', 'keyword', 'q', 'search', 'term'];

/**
 * Queries from a file: one per line, or a CSV with a header whose other columns become tags (so that keyword
 * categories survive into the analytics). Blank lines and repeated queries are dropped and counted: a query is
 * never sent twice. Inline queries (given in code or JSON) come first.
 */
export function readQueryList(inline: readonly string[], file: string | undefined): QueryList {
  const listed: ListedQuery[] = inline.map((query) => ({ query, tags: undefined }));
  let tagColumns: string[] = [];
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8').replace(/^\uFEFF/, '');
    } catch (error) {
      throw new ValidationError('Invalid search source', [{ path: 'search.queriesFile', message: `cannot be read: ${(error as Error).message}` }]);
    }
    if (/\.csv$/i.test(file)) {
      const fromCsv = readCsv(text, file);
      tagColumns = fromCsv.tagColumns;
      listed.push(...fromCsv.queries);
    } else {
      for (const line of text.split(/\r?\n/)) listed.push({ query: line, tags: undefined });
      // A final newline is not a blank line.
      if (text.endsWith('\n')) listed.pop();
    }
  }
  const seen = new Set<string>();
  const queries: ListedQuery[] = [];
  const dropped = { blank: 0, duplicate: 0 };
  for (const entry of listed) {
    const query = entry.query.normalize('NFC').trim();
    if (query === '') dropped.blank += 1;
    else if (seen.has(query)) dropped.duplicate += 1;
    else {
      seen.add(query);
      queries.push({ query, tags: entry.tags });
    }
  }
  return { queries, tagColumns, dropped };
}

function readCsv(text: string, file: string): { queries: ListedQuery[]; tagColumns: string[] } {
  let records: string[][];
  try {
    records = parse(text, { relax_column_count: true, skip_empty_lines: false }) as string[][];
  } catch (error) {
    throw new ValidationError('Invalid search source', [{ path: 'search.queriesFile', message: `${file} is not valid CSV: ${(error as Error).message}` }]);
  }
  const [header, ...rows] = records;
  if (!header || header.length === 0) return { queries: [], tagColumns: [] };
  const names = header.map((name) => name.trim());
  const lower = names.map((name) => name.toLowerCase());
  const queryIndex = Math.max(0, QUERY_COLUMNS.map((name) => lower.indexOf(name)).find((i) => i >= 0) ?? 0);
  const tagIndexes = names.map((_, i) => i).filter((i) => i !== queryIndex);
  const tagColumns = tagIndexes.map((i) => tagColumnName(names[i] as string, i));
  if (new Set(tagColumns).size !== tagColumns.length) {
    throw new ValidationError('Invalid search source', [{ path: 'search.queriesFile', message: `${file} has columns that become the same column name: ${tagColumns.join(', ')}` }]);
  }
  const queries = rows.map((row) => ({
    query: row[queryIndex] ?? '',
    tags: tagIndexes.length === 0 ? undefined : Object.fromEntries(tagIndexes.map((i, n) => [tagColumns[n] as string, row[i] ?? ''])),
  }));
  return { queries, tagColumns };
}

/** A header made into a safe column name that cannot collide with the normalized columns. */
function tagColumnName(header: string, index: number): string {
  let name = header
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/^_+|_+$/g, '');
  if (name === '') name = `column_${index + 1}`;
  if (/^\d/.test(name)) name = `_${name}`;
  if ((NORMALIZED_COLUMNS as readonly string[]).includes(name)) name = `tag_${name}`;
  return name.slice(0, 60);
}
