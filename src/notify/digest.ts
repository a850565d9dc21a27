import { numbered } from '../analytics/reader.ts';
import { POSTGRES, SQLITE } from '../analytics/dialect.ts';
import { viewName } from '../analytics/views.ts';
import type { ResultsDatabase } from '../sinks/sink.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import type { NotificationStore } from '../state/notification-store.ts';
import { type Digest, type DigestEntry as Entry } from './digest-schema.ts';
import { digestStatements } from './statements.ts';

export { type Digest, digestSchema } from './digest-schema.ts';

/** Entries kept in each list of a digest (entered, left, moved, failed series); the rest are counted, not listed. */
export const DIGEST_LIST_LIMIT = 100;

// What of a row's text a digest keeps: a receiver, and this process's memory, never get megabytes.
const MAX_URL_CHARS = 2000;
const MAX_TITLE_CHARS = 200;
const MAX_ERROR_CHARS = 300;


/** A results table whose `changes` view the runner created (docs/analytics.md), where it lives. */
export interface ChangesTable {
  at: ResultsDatabase;
  table: string;
}

export interface DigestInput {
  runId: string;
  /** Where the run's failed series are read. */
  store: NotificationStore;
  /** The first results table with a `changes` view, if any. */
  changes: ChangesTable | undefined;
  /** How many of the run's series failed (the summary's count). */
  failedSeries: number;
  top: number;
  minRankMove: number;
}

/**
 * The digest of a run's end: per query and country, URLs that entered or left the top N and rank moves of at least
 * `minRankMove`, from the `changes` view's rows (so that the view's rules — which runs it compares, what a failed
 * series' rows count as — are the digest's too); and the run's failed series, from the state store. Each list is
 * bounded, with counts of what it leaves out. A part that cannot be read is said in `notes`, never thrown.
 */
export async function runDigest(input: DigestInput): Promise<Digest> {
  const notes: string[] = [];
  const failed = await failedPart(input, notes);
  const changes = await changesPart(input, notes);
  return {
    table: changes.table,
    since: changes.since,
    top: input.top,
    minRankMove: input.minRankMove,
    series: changes.series,
    failedSeries: failed.list,
    counts: { ...changes.counts, failedSeries: failed.count },
    omitted: { ...changes.omitted, failedSeries: failed.count - failed.list.length },
    notes,
  };
}

async function failedPart(input: DigestInput, notes: string[]): Promise<{ list: Digest['failedSeries']; count: number }> {
  if (input.failedSeries === 0) return { list: [], count: 0 };
  try {
    const rows = await input.store.failedSeries(input.runId, DIGEST_LIST_LIMIT);
    const list = rows.map(({ endpoint, query, country, lang, errorKind, error }) => ({ endpoint, query, country, lang, errorKind, error: cut(error, MAX_ERROR_CHARS) }));
    return { list, count: Math.max(input.failedSeries, list.length) };
  } catch (error) {
    notes.push(`the failed series could not be read: ${reason(error)}`);
    return { list: [], count: input.failedSeries };
  }
}

type ChangesPart = Pick<Digest, 'table' | 'since' | 'series'> & { counts: Omit<Digest['counts'], 'failedSeries'>; omitted: Omit<Digest['omitted'], 'failedSeries'> };

async function changesPart(input: DigestInput, notes: string[]): Promise<ChangesPart> {
  const none = { entered: 0, left: 0, moved: 0 };
  const empty = (table: string | null, since: string | null): ChangesPart => ({ table, since, series: [], counts: none, omitted: none });
  const { changes } = input;
  if (changes === undefined) {
    notes.push('no results table with a changes view (a SQLite or PostgreSQL sink in append mode, with no dedupe wider than a series): only failed series are listed');
    return empty(null, null);
  }
  const query = databaseQuery(changes.at);
  const table = changes.table;
  try {
    const t = query.qualified(table);
    const runs = await query.all(digestStatements.runs(t, query.dialect), [input.runId]);
    const latest = (runs[0]?.latest as string | null | undefined) ?? null;
    const since = (runs[0]?.before as string | null | undefined) ?? null;
    if (latest !== input.runId) {
      notes.push(`this run wrote no rows to ${table}: nothing to compare`);
      return empty(table, since);
    }
    if (since === null) {
      notes.push(`the first run in ${table}: nothing to compare with`);
      return empty(table, null);
    }
    const rows = await query.all(digestStatements.changes(query.qualified(viewName(table, 'changes')), query.dialect), [
      input.top,
      input.top,
      input.top,
      input.top,
      input.top,
      input.top,
      input.minRankMove,
      input.runId,
      MAX_URL_CHARS,
      MAX_TITLE_CHARS,
      DIGEST_LIST_LIMIT,
    ]);
    return { table, since, ...grouped(rows) };
  } catch (error) {
    notes.push(`the changes in ${table} could not be read: ${reason(error)}`);
    return empty(table, null);
  }
}

/** The listed rows by series, in order, and each list's total and what it left out. */
function grouped(rows: readonly Record<string, unknown>[]): Pick<ChangesPart, 'series' | 'counts' | 'omitted'> {
  const bySeries = new Map<string, Digest['series'][number]>();
  const counts = { entered: 0, left: 0, moved: 0 };
  const listed = { entered: 0, left: 0, moved: 0 };
  for (const row of rows) {
    const kind = row.kind as keyof typeof counts;
    counts[kind] = Number(row.total);
    listed[kind] += 1;
    const key = JSON.stringify([row.query, row.country, row.lang]);
    let series = bySeries.get(key);
    if (!series) {
      series = { query: String(row.query), country: String(row.country), lang: String(row.lang), entered: [], left: [], moved: [] };
      bySeries.set(key, series);
    }
    series[kind].push(entryOf(row));
  }
  const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const series = [...bySeries.values()].sort((a, b) => byText(a.query, b.query) || byText(a.country, b.country) || byText(a.lang, b.lang));
  return { series, counts, omitted: { entered: counts.entered - listed.entered, left: counts.left - listed.left, moved: counts.moved - listed.moved } };
}

function entryOf(row: Record<string, unknown>): Entry {
  const rank = (value: unknown) => (value === null || value === undefined ? null : Number(value));
  return {
    url: (row.url as string | null) ?? null,
    title: (row.title as string | null) ?? null,
    rank: rank(row.current_rank),
    previousRank: rank(row.previous_rank),
  };
}

/** What the digest asks of a results database, in its dialect, on the run's own connection or pool. */
function databaseQuery(at: ResultsDatabase) {
  if (at.kind === 'sqlite') {
    return {
      dialect: SQLITE,
      qualified: (relation: string) => quoteIdentifier(relation),
      all: async (sql: string, params: readonly unknown[]) => at.db.prepare(sql).all(...params) as Record<string, unknown>[],
    };
  }
  return {
    dialect: POSTGRES,
    qualified: (relation: string) => `${quoteIdentifier(at.schema)}.${quoteIdentifier(relation)}`,
    all: async (sql: string, params: readonly unknown[]) => (await at.pool.query(numbered(sql), [...params])).rows as Record<string, unknown>[],
  };
}

function cut(text: string | null, max: number): string | null {
  return text === null || text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function reason(error: unknown): string {
  return cut(error instanceof Error ? error.message : String(error), MAX_ERROR_CHARS) ?? '';
}
