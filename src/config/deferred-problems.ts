import { ValidationError } from '../errors/validation-error.ts';

/**
 * Every problem of a pipeline file at once. A file builds its pipeline with calls (`searchPages({…})`,
 * `toSqlite({…})`, `definePipeline({…})`), each checking its own options as it is called: the first bad one threw
 * and the rest were never checked, so a file with three mistakes took three runs to fix, where a JSON config, one
 * schema, is checked whole. While the command line loads a file (`collectingProblems`), the builders of the package
 * root (`deferrable`) keep their problems instead of throwing, and give back a stand-in that carries them;
 * `definePipeline` says them with its own; and the load says any left over (a bad builder whose result was not used,
 * or was used inside another's, `combineSources`). Elsewhere a builder throws at once, as it always has.
 *
 * The state is a global slot by `Symbol.for`: a file may import the built package while the command line runs from
 * source. A file is loaded at a time on a thread, never two, so one slot serves.
 */
const COLLECTING = Symbol.for('webdata-etl.collecting-problems');
/** On a stand-in: the error its builder met. */
const PROBLEM = Symbol.for('webdata-etl.deferred-problem');

interface Collecting {
  met: ValidationError[];
  /** Met, and said by a `definePipeline` that took the stand-in. */
  said: Set<ValidationError>;
}

const slot = globalThis as Record<symbol, Collecting | undefined>;

export type BuilderKind = 'source' | 'stage' | 'sink';

/**
 * `build` as the package root exports it: the same function, except that while a file is being loaded a
 * ValidationError it throws is kept, and a stand-in of `kind` is returned that carries it (and throws it if used).
 */
export function deferrable<F extends (...args: never[]) => unknown>(kind: BuilderKind, build: F): F {
  const deferring = (...args: Parameters<F>): unknown => {
    try {
      return build(...args);
    } catch (error) {
      const collecting = slot[COLLECTING];
      if (collecting === undefined || !(error instanceof ValidationError)) throw error;
      collecting.met.push(error);
      return standIn(kind, error);
    }
  };
  return deferring as F;
}

/** Runs `load` (a pipeline file's import and definition) with the builders' problems kept, then says all of them. */
export async function collectingProblems<T>(subject: string, load: () => Promise<T>): Promise<T> {
  const outer = slot[COLLECTING];
  const collecting: Collecting = { met: [], said: new Set() };
  slot[COLLECTING] = collecting;
  const unsaid = () => [...new Set(collecting.met)].filter((met) => !collecting.said.has(met));
  let result: T;
  try {
    result = await load();
  } catch (error) {
    const left = unsaid();
    // A stand-in that was used (its property read, its method called) failed somewhere else: the problems come first.
    if (left.length === 0) throw error;
    const own = validationError(error);
    // (A stand-in that was used threw its own problem: said once.)
    throw ValidationError.combine(own?.subject ?? subject, own ? [own, ...left.filter((met) => met !== own)] : left);
  } finally {
    slot[COLLECTING] = outer;
  }
  const left = unsaid();
  if (left.length > 0) throw ValidationError.combine(subject, left);
  return result;
}

/**
 * The errors the stand-ins in a definition carry (its source, its stages, its sinks), marked said. Their problems
 * keep the paths their builders gave them (`search.countries.0`, `sqlite.table`), as when a builder throws. None
 * outside a load.
 */
export function deferredProblems(definition: unknown): ValidationError[] {
  if (typeof definition !== 'object' || definition === null) return [];
  const { source, stages, sinks } = definition as { source?: unknown; stages?: unknown; sinks?: unknown };
  const parts = [source, ...(Array.isArray(stages) ? stages : []), ...(Array.isArray(sinks) ? sinks : [])];
  const errors = parts.flatMap((part) => {
    if ((typeof part !== 'object' && typeof part !== 'function') || part === null) return [];
    const error = validationError((part as { [PROBLEM]?: unknown })[PROBLEM]);
    return error ? [error] : [];
  });
  for (const error of errors) slot[COLLECTING]?.said.add(error);
  return errors;
}

/** A ValidationError of any copy of the package (by name and shape: the file may load another copy than ours). */
function validationError(error: unknown): ValidationError | undefined {
  if (error instanceof ValidationError) return error;
  const named = error instanceof Error && error.name === 'ValidationError' && Array.isArray((error as { issues?: unknown }).issues);
  return named ? (error as ValidationError) : undefined;
}

/** What stands in for a source, a stage or a sink its builder refused: enough to be checked, and it throws if used. */
function standIn(kind: BuilderKind, error: ValidationError): unknown {
  const fail = (): never => {
    throw error;
  };
  if (kind === 'stage') return Object.assign(() => fail(), { [PROBLEM]: error });
  if (kind === 'source') return { [PROBLEM]: error, plan: fail, pages: fail };
  return { [PROBLEM]: error, kind: 'invalid', path: '', id: 'invalid:', commits: {}, open: fail, held: fail, close: fail };
}
