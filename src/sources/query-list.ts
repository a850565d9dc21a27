import { parse } from 'csv-parse/sync';
import { type ValidationIssue, ValidationError } from '../errors/validation-error.ts';
import { characterCount, MAX_QUERY_CHARACTERS, queryLengthProblem } from '../client/search-params.ts';
import { readInputFile } from '../input-file.ts';
import { NORMALIZED_COLUMNS } from '../stages/normalized-item.ts';
import { MAX_TAG_COLUMNS } from './tag-columns.ts';

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

/**
 * Limits of a query list, each far past any real one and each refused before anything is sent. The file is read whole
 * into memory, and so is the list, whose planning grows with it (docs/benchmarks.md#figures-the-code-cites); a
 * JavaScript Set holds no more than 16.7 million entries. Each tag column becomes a column of every output (SQLite
 * takes 2,000 at most); each tag value is copied into every row of its series.
 */
export const QUERY_LIST_LIMITS = { maxBytes: 256 * 1024 * 1024, maxQueries: 1_000_000, maxTagColumns: MAX_TAG_COLUMNS, maxTagCharacters: MAX_QUERY_CHARACTERS };

const SUBJECT = 'Invalid search source';
const FILE_FIELD = 'search.queriesFile';

/** Header names that hold the query in a CSV list, first found first; else the first column. */
const QUERY_COLUMNS = ['query', 'keyword', 'q', 'search', 'term'];

/**
 * Queries from a file: one per line, or a CSV with a header whose other columns become tags (so that keyword
 * categories survive into the analytics). Blank lines and repeated queries are dropped and counted: a query is
 * never sent twice. Inline queries (given in code or JSON) come first.
 */
export function readQueryList(inline: readonly string[], file: string | undefined): QueryList {
  if (inline.length > QUERY_LIST_LIMITS.maxQueries) {
    throw new ValidationError(SUBJECT, [{ path: 'search.queries', message: `holds ${count(inline.length)} queries; the most is ${count(QUERY_LIST_LIMITS.maxQueries)}: split the list into several pipelines` }]);
  }
  const listed: ListedQuery[] = inline.map((query) => ({ query, tags: undefined }));
  let tagColumns: string[] = [];
  // Where the n-th entry of `listed` came from, for the errors: the inline list's index, else the file's line or row.
  let where = (n: number) => ({ path: `search.queries.${n}`, at: '' });
  if (file !== undefined) {
    const text = readInputFile(file, { maxBytes: QUERY_LIST_LIMITS.maxBytes, field: FILE_FIELD, subject: SUBJECT, tooLarge: 'split it into several lists' });
    const room = QUERY_LIST_LIMITS.maxQueries - inline.length;
    const csv = /\.csv$/i.test(file);
    if (csv) {
      const fromCsv = readCsv(text, file, room);
      tagColumns = fromCsv.tagColumns;
      listed.push(...fromCsv.queries);
    } else {
      // Counted before they are split: a list too long is refused before it takes the memory it would.
      if (lineCount(text, room) > room) throw tooMany(file, 'lines');
      for (const line of text.split(/\r?\n/)) listed.push({ query: line, tags: undefined });
      // A final newline is not a blank line.
      if (text.endsWith('\n')) listed.pop();
    }
    const inlineWhere = where;
    // A CSV's rows are numbered as a spreadsheet shows them, the header being row 1.
    where = (n) => (n < inline.length ? inlineWhere(n) : { path: FILE_FIELD, at: csv ? `row ${n - inline.length + 2}: ` : `line ${n - inline.length + 1}: ` });
  }
  const seen = new Set<string>();
  const queries: ListedQuery[] = [];
  const dropped = { blank: 0, duplicate: 0 };
  const tooLong = problems('queries too long');
  listed.forEach((entry, n) => {
    const query = entry.query.normalize('NFC').trim();
    const problem = queryLengthProblem(query);
    if (problem) {
      const { path, at } = where(n);
      tooLong.add(path, `${at}the query ${problem}`);
    } else if (query === '') dropped.blank += 1;
    else if (seen.has(query)) dropped.duplicate += 1;
    else {
      seen.add(query);
      queries.push({ query, tags: entry.tags });
    }
  });
  // Every query is checked before the first is sent: a list is refused whole, not cut short at its first bad line.
  tooLong.throwIfAny();
  return { queries, tagColumns, dropped };
}

function readCsv(text: string, file: string, room: number): { queries: ListedQuery[]; tagColumns: string[] } {
  let records: string[][];
  try {
    // The header, the rows there is room for, and one more to tell that there are too many.
    records = parse(text, { relax_column_count: true, skip_empty_lines: false, to: room + 2 }) as string[][];
  } catch (error) {
    throw new ValidationError(SUBJECT, [{ path: FILE_FIELD, message: `${file} is not valid CSV: ${(error as Error).message}` }]);
  }
  const [header, ...rows] = records;
  if (!header || header.length === 0) return { queries: [], tagColumns: [] };
  if (rows.length > room) throw tooMany(file, 'rows');
  const names = header.map((name) => name.trim());
  const lower = names.map((name) => name.toLowerCase());
  const queryIndex = Math.max(0, QUERY_COLUMNS.map((name) => lower.indexOf(name)).find((i) => i >= 0) ?? 0);
  const tagIndexes = names.map((_, i) => i).filter((i) => i !== queryIndex);
  if (tagIndexes.length > QUERY_LIST_LIMITS.maxTagColumns) {
    throw new ValidationError(SUBJECT, [
      {
        path: FILE_FIELD,
        message: `${file} has ${count(tagIndexes.length)} columns besides the query; the most is ${QUERY_LIST_LIMITS.maxTagColumns} (each becomes a column of every output): keep only the columns to carry as tags`,
      },
    ]);
  }
  const tagColumns = tagIndexes.map((i) => tagColumnName(names[i] as string, i));
  if (new Set(tagColumns).size !== tagColumns.length) {
    throw new ValidationError(SUBJECT, [{ path: FILE_FIELD, message: `${file} has columns that become the same column name: ${tagColumns.join(', ')}` }]);
  }
  const tooLong = problems('tags too long');
  const queries = rows.map((row, r) => {
    for (const i of tagIndexes) {
      const value = row[i] ?? '';
      if (value.length <= QUERY_LIST_LIMITS.maxTagCharacters) continue;
      const characters = characterCount(value);
      if (characters > QUERY_LIST_LIMITS.maxTagCharacters) {
        tooLong.add(
          FILE_FIELD,
          `row ${r + 2}, column "${names[i]}": the tag is ${count(characters)} characters long; the most is ${count(QUERY_LIST_LIMITS.maxTagCharacters)} (it is copied into every row of its series)`,
        );
      }
    }
    return {
      query: row[queryIndex] ?? '',
      tags: tagIndexes.length === 0 ? undefined : Object.fromEntries(tagIndexes.map((i, n) => [tagColumns[n] as string, row[i] ?? ''])),
    };
  });
  tooLong.throwIfAny();
  return { queries, tagColumns };
}

/** The lines of `text` (a final line end ends the last one), counted up to `max` + 1 at the most. */
function lineCount(text: string, max: number): number {
  let lines = 0;
  for (let at = text.indexOf('\n'); at !== -1 && lines <= max; at = text.indexOf('\n', at + 1)) lines += 1;
  return text === '' || text.endsWith('\n') || lines > max ? lines : lines + 1;
}

function tooMany(file: string, what: 'lines' | 'rows'): ValidationError {
  const most = count(QUERY_LIST_LIMITS.maxQueries);
  return new ValidationError(SUBJECT, [
    { path: FILE_FIELD, message: `${file} has more ${what} than a pipeline may have queries: ${most} in all, inline queries included; split the list into several pipelines` },
  ]);
}

/** Problems of one kind: the first few listed, the rest counted (a file can hold millions). */
function problems(what: string) {
  const issues: ValidationIssue[] = [];
  let total = 0;
  return {
    add(path: string, message: string) {
      total += 1;
      if (issues.length < 5) issues.push({ path, message });
    },
    throwIfAny() {
      if (total === 0) return;
      const more = total - issues.length;
      throw new ValidationError(SUBJECT, more > 0 ? [...issues, { path: (issues.at(-1) as ValidationIssue).path.replace(/\.\d+$/, ''), message: `and ${count(more)} more ${what}` }] : issues);
    },
  };
}

const count = (n: number) => n.toLocaleString('en-US');

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
