import { pathToFileURL } from 'node:url';

/**
 * A run's thread finds a pipeline file's pipeline by importing the file again; while it does, the file's own call of
 * `runFromCommandLine` hands the pipeline over here and runs nothing. A global slot by `Symbol.for`: the file may load
 * the built package while the thread runs from source.
 */
const HAND_OVER = Symbol.for('webdata-etl.hand-over-pipeline');
const slot = globalThis as Record<symbol, ((pipeline: unknown) => void) | undefined>;

/**
 * On a run's thread that is importing the file: hands `pipeline` over and says so (then run nothing). At once, not
 * after an await: a file may call `runFromCommandLine` without awaiting it.
 */
export function handedOver(pipeline: unknown): boolean {
  const handOver = slot[HAND_OVER];
  if (handOver === undefined) return false;
  handOver(pipeline);
  return true;
}

/** Imports the file at `file` (absolute) and resolves to the pipeline it handed over, else its default export. */
export async function importHandingOver(file: string): Promise<unknown> {
  let handed: unknown;
  slot[HAND_OVER] = (pipeline) => (handed ??= pipeline);
  try {
    const module = (await import(pathToFileURL(file).href)) as { default?: unknown };
    return handed ?? module.default;
  } finally {
    delete slot[HAND_OVER];
  }
}
