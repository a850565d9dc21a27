import { dirname, resolve } from 'node:path';
import { ValidationError } from '../errors/validation-error.ts';
import type { Sink } from '../sinks/sink.ts';
import type { Pipeline } from '../config/define.ts';
import { type PostgresTarget, postgresTarget } from '../postgres/target.ts';

/**
 * The PostgreSQL database of the run state, when it is one: `stateUrl` (the command line's), else `state.url`, else —
 * when no SQLite file is named for it (`state.path`, a SQLite sink) — the first PostgreSQL sink's database, so that
 * its rows and the state commit together, as with the first SQLite sink's file.
 */
export function stateDatabase(pipeline: Pipeline, stateUrl?: string): PostgresTarget | undefined {
  if (stateUrl !== undefined) return postgresTarget(stateUrl, process.env, { from: '--state (or WEBDATA_STATE_URL)' });
  if (pipeline.state.url !== undefined) return postgresTarget(pipeline.state.url, process.env, { namedBy: 'state.url' });
  const sinks = pipeline.sinks as Sink<unknown>[];
  if (pipeline.state.path !== undefined || sinks.some((sink) => sink.kind === 'sqlite')) return undefined;
  const sink = sinks.find((sink) => sink.kind === 'postgres') as { target?: PostgresTarget; schema?: string; table?: string } | undefined;
  // Named by the sink in messages: the user wrote a sink, not a state store (the same database, the same pool).
  return sink?.target && { ...sink.target, sink: `${sink.schema}.${sink.table}` };
}

/**
 * The file a sink writes, if it writes one: not stdout (`-`), not a PostgreSQL table (its path is a label), not the
 * target of a sink of your own (a URL, a name).
 */
export function fileOf(sink: Sink<unknown>): string | undefined {
  return sink.writesFile === false || sink.kind === 'postgres' || sink.path === '-' ? undefined : sink.path;
}

/**
 * The state store lives in the first SQLite sink's file, so that its rows and the state can commit together; else in
 * `<name>.state.sqlite` beside the first sink (stdout's `-`: the working directory). A sink of your own names a
 * target, not a file: it is passed over, and a pipeline with no other sink keeps its state in the working directory.
 */
export function statePath(pipeline: Pipeline): string {
  if (pipeline.state.path) return resolve(pipeline.state.path);
  const sinks = (pipeline.sinks as Sink<unknown>[]).filter((sink) => sink.writesFile !== false);
  const sqlite = sinks.find((sink) => sink.kind === 'sqlite');
  if (sqlite) return sqlite.path;
  return resolve(sinks[0] === undefined ? '.' : dirname(sinks[0].path), `${pipeline.name}.state.sqlite`);
}

/**
 * Two sinks of one pipeline writing the same file or table would interleave (or cut) each other's rows, and a file
 * sink on the state store's own file would corrupt it: refused before anything is opened.
 */
export function checkOutputs(sinks: readonly Sink<unknown>[], state: string): void {
  const outputs = sinks.map((sink) => ({ file: sink.path === '-' ? undefined : resolve(sink.path), table: sink.kind === 'sqlite' ? (sink as { table?: string }).table : undefined }));
  const issues: { path: string; message: string }[] = [];
  outputs.forEach((output, index) => {
    if (output.file === undefined) return;
    // SQLite sinks may share a database file, each with its own table; anything else needs the file to itself.
    const clash = outputs.findIndex((other, o) => o < index && other.file === output.file && (other.table === undefined || output.table === undefined || other.table === output.table));
    const where = `${(sinks[index] as Sink<unknown>).path}${output.table ? ` (table "${output.table}")` : ''}`;
    if (clash !== -1) issues.push({ path: `sinks.${index}`, message: `writes ${where}, as sinks.${clash} does: give each sink its own file or table` });
    else if (output.table === undefined && output.file === resolve(state)) {
      issues.push({ path: `sinks.${index}`, message: `writes ${where}, which is the state store: give the sink another file, or state.path another place` });
    }
  });
  if (issues.length > 0) throw new ValidationError('Invalid pipeline outputs', issues);
}

/**
 * A failure of the disk, turned into what to do: where the failing write did not say which file it was, SQLite's own
 * errors come from one of its files (the state store's or a SQLite sink's), the others from any output.
 */
export function outputSuspects(error: unknown, pipeline: Pipeline): string {
  const sinks = pipeline.sinks as Sink<unknown>[];
  const sqlite = String((error as { code?: unknown } | undefined)?.code).startsWith('SQLITE_');
  const suspects = sinks.filter((sink) => !sqlite || sink.kind === 'sqlite').map(fileOf);
  return [...new Set([statePath(pipeline), ...suspects.filter((path) => path !== undefined)])].join(', ');
}
