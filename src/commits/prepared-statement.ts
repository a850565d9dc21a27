import { createHash } from 'node:crypto';

/**
 * How many distinct statement texts a process names: a page statement's text depends only on which of its parts a
 * page has (spend, dedupe keys, a journal entry, a snapshot or changes of stage state) and on the tables, so a run
 * uses a handful. Past this, statements go unnamed, as they did before: a process that opens many pipelines or tables
 * (a test suite, a scheduler) does not keep a prepared statement per text on every connection forever.
 */
const MAX_NAMED = 64;
const names = new Map<string, string>();

/** A query as node-postgres takes it: named, so that each connection parses and plans it once (`preparedQuery`). */
export interface PreparedQuery {
  readonly name?: string;
  readonly text: string;
  readonly values: unknown[];
}

/**
 * A page's statement as a named (prepared) statement: PostgreSQL parses and plans an unnamed statement anew each
 * time, which for a page statement of data-modifying CTEs was about a third of its time on the server (parse 0.4 ms,
 * bind with planning 1.3 ms, execute 1.7 ms: docs/benchmarks-history.md#postgresql-sink-2026-11-26-issue-33). Named, each
 * connection of the pool prepares it on first use and runs it from then on with the page's values. The name is the
 * text's digest: the same text is the same statement on every connection, and two texts never share a name (which
 * node-postgres refuses). This is session state, like the advisory locks: a pooler in transaction mode could not
 * carry it (docs/distributed-design.md#postgresql-connections).
 */
export function preparedQuery(text: string, values: unknown[]): PreparedQuery {
  let name = names.get(text);
  if (name === undefined && names.size < MAX_NAMED) {
    name = `webdata_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
    names.set(text, name);
  }
  return name === undefined ? { text, values } : { name, text, values };
}
