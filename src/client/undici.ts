import { createRequire } from 'node:module';
import type * as Undici from 'undici';

/**
 * undici, loaded when the first client is made: a process that only defines pipelines — a pipeline file's main thread,
 * a host program calling run(url), whose runs work on a thread of their own (src/threads/bounded-thread.ts) — does not
 * carry it (more than half of what importing webdata-etl costs in memory: docs/benchmarks.md#figures-the-code-cites).
 */
export function undici(): typeof Undici {
  loaded ??= createRequire(import.meta.url)('undici') as typeof Undici;
  return loaded;
}
let loaded: typeof Undici | undefined;
