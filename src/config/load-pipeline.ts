import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ValidationError } from '../errors/validation-error.ts';
import { pipelineFromConfig } from './json-config.ts';
import { readInputFile } from '../input-file.ts';
import { definePipeline, type Pipeline } from './define.ts';
import { collectingProblems } from './deferred-problems.ts';
import { UsageError } from '../errors/usage-error.ts';
import { isInputError } from '../errors/is-input-error.ts';

/** A JSON config this large is not a config: lists of queries go in `search.queriesFile`. */
export const MAX_CONFIG_BYTES = 16 * 1024 * 1024;

/** A pipeline from a file: a module whose default export is a pipeline (.ts, .js), or a JSON config. */
export async function loadPipeline(file: string): Promise<Pipeline> {
  const path = resolve(file);
  if (!existsSync(path)) throw new UsageError(`no such file: ${file}`);
  if (/\.json$/i.test(path)) return definePipeline(pipelineFromConfig(readConfig(path, file)));
  if (!/\.(ts|mts|js|mjs)$/i.test(path)) throw new UsageError(`${file}: expected a pipeline module (.ts, .js) or a JSON config (.json)`);
  // Every problem of the file at once: its builders' and its definition's (deferred-problems.ts says how).
  return collectingProblems(`Invalid pipeline file ${file}`, async () => definePipeline((await importPipelineModule(file, path)) as Pipeline));
}

/** The default export of the module at `path`, or a UsageError saying what is wrong with the file. */
async function importPipelineModule(file: string, path: string): Promise<object> {
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(path).href)) as { default?: unknown };
  } catch (error) {
    // The file is the user's input like a JSON config is: one that cannot be loaded is theirs to fix (exit 2).
    if (isInputError(error)) throw error;
    throw new UsageError(`${file} could not be loaded: ${describe(error, path)}`);
  }
  if (module.default === undefined) {
    throw new UsageError(`${file} has no default export: end it with \`export default definePipeline({ … })\``);
  }
  if (typeof module.default !== 'object' || module.default === null) {
    throw new UsageError(`${file}: the default export is ${kind(module.default)}, not a pipeline: end the file with \`export default definePipeline({ … })\``);
  }
  return module.default;
}

function readConfig(path: string, file: string): unknown {
  const subject = `Invalid pipeline config ${file}`;
  const text = readInputFile(path, { maxBytes: MAX_CONFIG_BYTES, field: '(file)', subject, tooLarge: 'put long lists of queries in a file named by search.queriesFile' });
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw new ValidationError(subject, [{ path: '(file)', message: `is not valid JSON: ${(error as Error).message}` }]);
  }
  return config;
}

const kind = (value: unknown) => (value === null ? 'null' : `a ${typeof value}`);

/** The error's message, with the line of the file where it arose when the stack says (not for every syntax error). */
function describe(error: unknown, path: string): string {
  if (!(error instanceof Error)) return String(error);
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const line = new RegExp(`(?:${escape(pathToFileURL(path).href)}|${escape(path)}):(\\d+)`).exec(error.stack ?? '')?.[1];
  return line === undefined ? error.message : `${error.message} (line ${line})`;
}
