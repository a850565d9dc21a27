import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ValidationError } from '../client/errors.ts';
import { pipelineFromConfig } from '../config/json-config.ts';
import { definePipeline, type Pipeline } from '../run/define.ts';
import { UsageError } from './usage-error.ts';

/** A pipeline from a file: a module whose default export is a pipeline (.ts, .js), or a JSON config. */
export async function loadPipeline(file: string): Promise<Pipeline> {
  const path = resolve(file);
  if (!existsSync(path)) throw new UsageError(`no such file: ${file}`);
  if (/\.json$/i.test(path)) {
    let config: unknown;
    try {
      config = JSON.parse(readFileSync(path, 'utf8').replace(/^\uFEFF/, ''));
    } catch (error) {
      throw new ValidationError(`Invalid pipeline config ${file}`, [{ path: '(file)', message: `is not valid JSON: ${(error as Error).message}` }]);
    }
    return definePipeline(pipelineFromConfig(config));
  }
  if (!/\.(ts|mts|js|mjs)$/i.test(path)) throw new UsageError(`${file}: expected a pipeline module (.ts, .js) or a JSON config (.json)`);
  const module = (await import(pathToFileURL(path).href)) as { default?: unknown };
  if (module.default === undefined) {
    throw new UsageError(`${file} has no default export: end it with \`export default definePipeline({ … })\``);
  }
  return definePipeline(module.default as Pipeline);
}
