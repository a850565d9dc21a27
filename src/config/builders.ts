// The builders of the package root, as a pipeline file calls them: each the function of its own module, which while
// the command line loads the file keeps its problems for the file's definition to say with the others, instead of
// throwing at the first (deferred-problems.ts). Called anywhere else, each throws at once, as it always has. Only
// the builders that check what they are given are here; the package root exports the rest as they are.
import { combineSources as combineSourcesNow } from '../sources/combine.ts';
import { defineSource as defineSourceNow } from '../sources/define-source.ts';
import { endpointPages as endpointPagesNow } from '../sources/endpoint-pages.ts';
import { searchPages as searchPagesNow } from '../sources/search-pages.ts';
import { dedupe as dedupeNow } from '../stages/dedupe.ts';
import { toCsv as toCsvNow } from '../sinks/csv.ts';
import { toJsonl as toJsonlNow } from '../sinks/jsonl.ts';
import { toPostgres as toPostgresNow } from '../sinks/postgres.ts';
import { toSqlite as toSqliteNow } from '../sinks/sqlite.ts';
import { deferrable } from './deferred-problems.ts';

/** The search source: queries × countries × langs, paged (docs/pipelines.md#search-searchpages). */
export const searchPages = deferrable('source', searchPagesNow);
/** A source over another catalog endpoint, its params and its pagination declared (docs/pipelines.md#other-endpoints-endpointpages). */
export const endpointPages = deferrable('source', endpointPagesNow);
/** Several sources as one: their series side by side under one scheduler, budget and outputs. */
export const combineSources = deferrable('source', combineSourcesNow);
/** A source of one's own: its series, its requests, its paginator (docs/pipelines.md#writing-a-source). */
export const defineSource = deferrable('source', defineSourceNow);
/** Drops the items already seen in a scope (the series by default), by canonical URL or by fields. */
export const dedupe = deferrable('stage', dedupeNow);
/** Rows in a SQLite table, committed with the run state when the state is in the same file (exactly once). */
export const toSqlite = deferrable('sink', toSqliteNow);
/** Rows in a PostgreSQL table. */
export const toPostgres = deferrable('sink', toPostgresNow);
/** A CSV file, appended page by page. */
export const toCsv = deferrable('sink', toCsvNow);
/** JSON Lines: a file, or stdout (`path: '-'`). */
export const toJsonl = deferrable('sink', toJsonlNow);
